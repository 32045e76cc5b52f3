"""A synthetic fleet of journals, written the way the middleware writes them.

Each vehicle runs one to three boots (so restarts happen; a vehicle with more
than one boot has its first end without a ``stop``, as a crash would). Per
boot, a provider publishes eight 1 Hz keys (``tick_ns``); ``dashboard``
receives every event, ``slow`` loses some (``evicted`` records, never more
than three of a key in a row, and the seq gaps they explain); the cabin
temperature goes silent for a third of the boot (a stale signal, and so
stale deliveries to both apps); the journal drops a few of its own records
once (an offset gap and a ``journal_dropped`` record). A crashed boot also
loses records to a failed write and records it had not written when it
ended; the next boot reports both (``journal_dropped`` with
``lost_boot_id``). With ``tamper``, one record of the first vehicle is
edited after writing, which breaks its hash chain; with ``trim``, the
journal's retention removes the first segment of the second vehicle's first
boot, and a ``journal_trimmed`` record says so. At the ``full`` level the
window level's provider says it failed for five ticks in each boot (a
``sensor_fault``, then values again), and in a boot that stops cleanly the
latitude fails for its last three ticks (a ``network_error`` still open at
the end): the failure intervals. ``dashboard`` subscribes to the speed with a
filter (at most one event per 2 s): each event it gets stands for two
writes, and the writes held back have no seq (no gap).

The lines are made by the middleware's own chain code, so they verify exactly
like a real journal. Returns the facts a test can check the analysis against.
:func:`landing_files` lays such journals out as a collector's landing area.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO

from vehicle_middleware.contract.journal import landing
from vehicle_middleware.contract.journal.chain import OFFSET_MOD, Chain, OffsetCounter
from vehicle_middleware.contract.journal.records import Cause, Kind
from vehicle_middleware.contract.journal.segments import segment_name

__all__ = [
    "FAILED_KEY",
    "FILTERED_KEY",
    "KEYS",
    "OPEN_FAILED_KEY",
    "STALE_KEY",
    "TICK_NS",
    "landing_files",
    "write_fleet",
]

KEYS = [
    "Vehicle.Speed",
    "Vehicle.Cabin.HVAC.AmbientAirTemperature",
    "Vehicle.Body.Windows.Row2.Right.Level",
    "Vehicle.Chassis.Axle.Row1.Wheel.Left.Speed",
    "Vehicle.Chassis.Axle.Row1.Wheel.Right.Speed",
    "Vehicle.Powertrain.TractionBattery.StateOfCharge.Current",
    "Vehicle.CurrentLocation.Latitude",
    "Vehicle.CurrentLocation.Longitude",
]
STALE_KEY = "Vehicle.Cabin.HVAC.AmbientAirTemperature"
FAILED_KEY = "Vehicle.Body.Windows.Row2.Right.Level"
"""Fails (``sensor_fault``) for :data:`FAILED_TICKS` ticks in each boot at ``full``."""
OPEN_FAILED_KEY = "Vehicle.CurrentLocation.Latitude"
"""Fails (``network_error``) for the last 3 ticks of each boot that stops cleanly."""
FAILED_TICKS = 5
FILTERED_KEY = "Vehicle.Speed"
"""``dashboard``'s subscription to it has a filter: one event per two ticks."""
_FILTER = {"min_interval_ms": 2000, "threshold": None, "range": None}
TICK_NS = 1_000_000_000
"""Each key is written once per tick: 1 Hz signals by default."""
T0 = 1_790_000_000 * 10**9  # a fixed start: reproducible dates
RESTART_NS = 5 * 10**9
"""From a boot's last record to the next boot's first."""
MAX_DROPS_IN_A_ROW = 3
"""``slow`` never loses more of one key in a row, so its deliveries of a key
are never more than four ticks apart (no stale interval but the planted one,
at thresholds of five ticks or more)."""
LOST_IN_CRASH = (5, 3)
"""A crashed boot's records lost to a failed write (an offset gap) and not
written before it ended (after its last record)."""


class _Boot:
    def __init__(self, out: Path, vehicle: str, boot: str, rng: random.Random, t: int) -> None:
        self.vehicle, self.boot, self.t = vehicle, boot, t
        self.out, self.started = out, t
        self.offsets = OffsetCounter(rng.randrange(OFFSET_MOD))
        self.chain = Chain()
        self.segment = 0
        self.kinds: Counter[str] = Counter()
        """Records written, by kind (less any retention removed)."""
        self._segment_kinds: Counter[str] = Counter()
        self.path = out
        self.fh: BinaryIO | None = None
        self.rotate()

    def rotate(self) -> None:
        """Close this segment and start the next one."""
        if self.fh is not None:
            self.fh.close()
        self.segment += 1
        self.path = self.out / segment_name(self.started, self.boot, self.segment, compress=False)
        self.fh = self.path.open("wb")
        self._segment_kinds = Counter()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None

    def write(self, kind: Kind, **fields: Any) -> dict[str, Any]:
        rec = {
            "kind": kind,
            "vehicle_id": self.vehicle,
            "boot_id": self.boot,
            "offset": self.offsets.take(),
            "time_ns": self.t,
            **fields,
        }
        assert self.fh is not None
        self.fh.write(self.chain.line(rec))
        self.kinds[kind] += 1
        self._segment_kinds[kind] += 1
        return rec

    def skip(self, n: int) -> None:
        """Records the journal lost: offsets used, nothing written."""
        for _ in range(n):
            self.offsets.take()

    def trim_first_segment(self) -> dict[str, Any]:
        """Retention: rotate, write one record, remove the first segment and
        record ``journal_trimmed`` (as the writer does when a new segment
        takes the directory over its cap)."""
        first, removed = self.path, Counter(self._segment_kinds)
        self.rotate()
        kept = self.write(Kind.KEY_ADDED, app="vehicle-sim", key=KEYS[0], key_id=1)
        size = first.stat().st_size
        first.unlink()
        self.kinds -= removed
        fact = {
            "trimmed_boot_id": self.boot,
            "files": 1,
            "bytes": size,
            "kept_offset": kept["offset"],
            "kept_prev_hash": kept["prev_hash"],
        }
        self.write(Kind.JOURNAL_TRIMMED, **fact)
        return {**fact, "vehicle_id": self.vehicle, "records": sum(removed.values())}


def write_fleet(
    output: str,
    *,
    vehicles: int = 3,
    records: int = 10_000,
    seed: int = 1,
    tamper: bool = False,
    trim: bool = False,
    tick_ns: int = TICK_NS,
    level: str = "full",
) -> dict[str, Any]:
    """Journals of a synthetic fleet under ``output``; returns what was planted.

    ``level``: the journal level the boots say they ran at; at ``drops`` no
    publish, queued or delivered record is written (only what that level keeps).
    """
    rng = random.Random(seed)
    facts: dict[str, Any] = {
        "vehicles": vehicles,
        "boots": 0,
        "restarts": 0,
        "unclean_stops": 0,
        "records": 0,
        "delivered": 0,
        "dropped": 0,
        "missing_journal_records": 0,
        "reported_journal_drops": 0,
        "stale_intervals": 0,
        "stale_deliveries": 0,
        "stale_gap_min_s": 1e9,
        "failure_intervals": 0,
        "open_failure_intervals": 0,
        "filtered_writes": 0,
        "tampered": None,
        "trimmed": None,
        "lost_reported_later": [],
    }
    per_tick = len(KEYS) * 5  # publish, and queued + delivered-or-dropped for two apps
    ticks_total = max(10, records // per_tick)
    for v in range(vehicles):
        vehicle = f"car-{v:04d}"
        out = Path(output) / vehicle
        out.mkdir(parents=True, exist_ok=True)
        n_boots = 1 + rng.randrange(3)
        facts["boots"] += n_boots
        facts["restarts"] += n_boots - 1
        t = T0 + v * 10**9
        lost: dict[str, Any] | None = None
        for b in range(n_boots):
            boot = _Boot(
                out, vehicle, f"{seed:04d}{v:04d}{b:02d}{rng.randrange(16**8):08x}", rng, t
            )
            ticks = ticks_total // n_boots
            crash = b < n_boots - 1 and b == 0
            lost = _run_boot(
                boot,
                rng,
                ticks,
                facts,
                tick_ns=tick_ns,
                crash=crash,
                report_lost=lost,
                trim=trim and v == 1 and b == 0,
                level=level,
            )
            t = boot.t + RESTART_NS
            boot.close()
            facts["records"] += sum(boot.kinds.values())
            facts["delivered"] += boot.kinds[Kind.DELIVERED]
            facts["dropped"] += boot.kinds[Kind.EVICTED]
            facts["unclean_stops"] += 0 if boot.kinds[Kind.STOP] else 1
            if tamper and v == 0 and b == 0:
                facts["tampered"] = _tamper(boot.path)
    return facts


def _run_boot(
    boot: _Boot,
    rng: random.Random,
    ticks: int,
    facts: dict[str, Any],
    *,
    tick_ns: int,
    crash: bool,
    report_lost: dict[str, Any] | None,
    trim: bool,
    level: str = "full",
) -> dict[str, Any] | None:
    """One boot's records; what it lost that the next boot must report (a crash)."""
    full = level == "full"
    boot.write(Kind.START, address="127.0.0.1:50051", level=level, settings={"batch_max": 64})
    if report_lost:
        # What the boot before lost and could not report (it crashed).
        for cause, count in report_lost["counts"].items():
            boot.write(
                Kind.JOURNAL_DROPPED, count=count, cause=cause, lost_boot_id=report_lost["boot"]
            )
            facts["reported_journal_drops"] += count
        facts["lost_reported_later"].append({"boot_id": report_lost["boot"], **report_lost})
    for i, key in enumerate(KEYS, 1):
        boot.write(Kind.KEY_ADDED, app="vehicle-sim", key=key, key_id=i)
    for app in ("dashboard", "slow"):
        boot.write(Kind.CONNECT, app=app, stream="events", details="{}")
        for i, key in enumerate(KEYS, 1):
            boot.write(
                Kind.REGISTER,
                app=app,
                key=key,
                key_id=i,
                queue=0,
                trigger="on_update",
                status="ok",
                filter=_FILTER if (app, key) == ("dashboard", FILTERED_KEY) else None,
            )
    seq = {(app, k): 0 for app in ("dashboard", "slow") for k in range(1, len(KEYS) + 1)}
    in_a_row = dict.fromkeys(range(1, len(KEYS) + 1), 0)
    version = dict.fromkeys(range(1, len(KEYS) + 1), 0)
    quiet = min(2000, ticks // 3)  # a third of the boot, at most 2,000 ticks
    silent = range(ticks // 3, ticks // 3 + quiet)
    if quiet > 1:
        facts["stale_intervals"] += 1
        facts["stale_deliveries"] += 2  # to both apps
    facts["stale_gap_min_s"] = min(facts["stale_gap_min_s"], (quiet + 1) * tick_ns / 1e9)
    lost_once, trim_at, failed_at = ticks // 2, ticks // 4, 2 * ticks // 3
    filtered = 0  # writes the dashboard's filter held back, in the boot so far
    # The providers' failures (at full only: the level that records writes).
    middle = ticks // 2 + 2  # after retention's trim (a quarter in): all on disk
    fails = {FAILED_KEY: ("sensor_fault", range(middle, middle + FAILED_TICKS))}
    if not crash:
        fails[OPEN_FAILED_KEY] = ("network_error", range(ticks - 3, ticks))
    if full and ticks >= 4 * FAILED_TICKS:
        facts["failure_intervals"] += len(fails)
        facts["open_failure_intervals"] += 0 if crash else 1
    else:
        fails = {}
    for tick in range(ticks):
        boot.t += tick_ns
        if trim and tick == trim_at:
            facts["trimmed"] = boot.trim_first_segment()
            facts["filtered_writes"] -= filtered  # their deliveries went with the segment
        if tick == lost_once:
            boot.skip(7)
            boot.write(Kind.JOURNAL_DROPPED, count=7, cause=Cause.BUFFER.value)
            facts["missing_journal_records"] += 7
            facts["reported_journal_drops"] += 7
        if crash and tick == failed_at:
            # A failed write the boot never got to report: the next boot does.
            boot.skip(LOST_IN_CRASH[0])
            facts["missing_journal_records"] += LOST_IN_CRASH[0]
        for i, key in enumerate(KEYS, 1):
            if key == STALE_KEY and tick in silent:
                continue
            version[i] += 1
            if full:
                code, failing = fails.get(key, ("", range(0)))
                boot.write(
                    Kind.PUBLISH,
                    key=key,
                    key_id=i,
                    version=version[i],
                    changed=True,
                    size=8,
                    writer="vehicle-sim",
                    **({"failure": code} if tick in failing else {}),
                )
            for app in ("dashboard", "slow"):
                if (app, key) == ("dashboard", FILTERED_KEY) and tick % 2 == 0:
                    continue  # held back by the filter: no event, no seq
                seq[(app, i)] += 1
                s = seq[(app, i)]
                if app == "slow" and in_a_row[i] < MAX_DROPS_IN_A_ROW and rng.random() < 0.3:
                    in_a_row[i] += 1
                    boot.write(
                        Kind.EVICTED,
                        app=app,
                        key=key,
                        key_id=i,
                        queue=0,
                        seq=s,
                        reason="queue full",
                    )
                    continue
                if app == "slow":
                    in_a_row[i] = 0
                if not full:
                    continue  # delivered: what the drops level does not record
                boot.write(Kind.QUEUED, app=app, key_id=i, queue=0, seq=s)
                stood_for = 2 if (app, key) == ("dashboard", FILTERED_KEY) else 1
                facts["filtered_writes"] += stood_for - 1
                filtered += stood_for - 1
                boot.write(
                    Kind.DELIVERED,
                    app=app,
                    key_id=i,
                    seq=s,
                    queue=0,
                    write_time_ns=boot.t,
                    sent_ns=boot.t + 200_000,
                    **({"writes": stood_for} if stood_for > 1 else {}),
                )
    if not crash:
        boot.write(Kind.STOP, reason="shutdown")
        return None
    # Records buffered but not written when the process died: offsets after
    # its last record (no gap shows them).
    boot.skip(LOST_IN_CRASH[1])
    return {
        "boot": boot.boot,
        "counts": {
            Cause.WRITE.value: LOST_IN_CRASH[0],
            Cause.CRASH.value: LOST_IN_CRASH[1],
        },
    }


def _tamper(path: Path) -> dict[str, Any]:
    lines = path.read_bytes().splitlines(keepends=True)
    i = len(lines) // 2
    while b'"kind":"publish"' not in lines[i]:
        i += 1
    offset = json.loads(lines[i])["offset"]
    lines[i] = lines[i].replace(b'"changed":true', b'"changed":false')
    path.write_bytes(b"".join(lines))
    return {"file": path.name, "offset": offset}


def landing_files(fleet: str, *, lines_per_file: int = 1000) -> dict[str, bytes]:
    """The journals under ``fleet`` (as :func:`write_fleet` writes them, or a
    copied journal directory per vehicle) as a collector lands them: files of
    at most ``lines_per_file`` lines of one boot, by the landing contract's
    names (:func:`vehicle_middleware.contract.journal.landing.data_path`, ``n`` counting per
    vehicle), in the order a collector writes them. Returns each
    file's path (relative to the landing area) and its bytes; the caller
    writes them (to land them in steps, or edit one first).
    """
    files: dict[str, bytes] = {}
    count: Counter[str] = Counter()
    for segment in sorted(Path(fleet).rglob("journal-*.jsonl")):
        lines = segment.read_bytes().splitlines(keepends=True)
        for i in range(0, len(lines), lines_per_file):
            chunk = lines[i : i + lines_per_file]
            first = json.loads(chunk[0])
            vehicle, boot = first["vehicle_id"], first["boot_id"]
            files[landing.data_path(vehicle, boot, first["offset"], count[vehicle])] = b"".join(
                chunk
            )
            count[vehicle] += 1
    return files
