"""A synthetic fleet of journals, written the way the middleware writes them.

Each vehicle runs one to three boots (so restarts happen; one boot ends without
a ``stop``, as a crash would). Per boot, a provider publishes a set of keys;
``dashboard`` receives every event, ``slow`` loses some (``evicted`` records,
and the seq gaps they explain); the cabin temperature goes silent for a while
(a stale signal); the journal drops a few of its own records once (an offset
gap and a ``journal_dropped`` record). With ``tamper``, one record of the first
vehicle is edited after writing, which breaks its hash chain.

The lines are made by the middleware's own chain code, so they verify exactly
like a real journal. Returns the facts a test can check the analysis against.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from middleware.journal.chain import Chain, OffsetCounter

__all__ = ["KEYS", "write_fleet"]

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
TICK_NS = 10_000_000
T0 = 1_790_000_000 * 10**9  # a fixed start: reproducible dates


class _Boot:
    def __init__(self, out: Path, vehicle: str, boot: str, rng: random.Random, t: int) -> None:
        self.vehicle, self.boot, self.t = vehicle, boot, t
        self.offsets = OffsetCounter(rng.randrange(2**32))
        self.chain = Chain()
        self.path = out / f"journal-{t:020d}-{boot}-000001.jsonl"
        self.fh = self.path.open("wb")
        self.records = 0

    def write(self, kind: str, **fields: Any) -> None:
        rec = {
            "kind": kind,
            "vehicle_id": self.vehicle,
            "boot_id": self.boot,
            "offset": self.offsets.take(),
            "time_ns": self.t,
            **fields,
        }
        self.fh.write(self.chain.line(rec))
        self.records += 1

    def skip(self, n: int) -> None:
        """Records the journal's buffer dropped: offsets used, nothing written."""
        for _ in range(n):
            self.offsets.take()


def write_fleet(
    output: str, *, vehicles: int = 3, records: int = 10_000, seed: int = 1, tamper: bool = False
) -> dict[str, Any]:
    rng = random.Random(seed)
    facts: dict[str, Any] = {
        "vehicles": vehicles,
        "boots": 0,
        "restarts": 0,
        "records": 0,
        "delivered": 0,
        "dropped": 0,
        "missing_journal_records": 0,
        "stale_intervals": 0,
        "stale_gap_min_s": 1e9,
        "tampered": None,
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
        for b in range(n_boots):
            boot = _Boot(
                out, vehicle, f"{seed:04d}{v:04d}{b:02d}{rng.randrange(16**8):08x}", rng, t
            )
            ticks = ticks_total // n_boots
            facts.update(_run_boot(boot, rng, ticks, facts, crash=(b < n_boots - 1 and b == 0)))
            t = boot.t + 5 * 10**9
            boot.fh.close()
            facts["records"] += boot.records
            if tamper and v == 0 and b == 0:
                facts["tampered"] = _tamper(boot.path, rng)
    return facts


def _run_boot(
    boot: _Boot, rng: random.Random, ticks: int, facts: dict[str, Any], *, crash: bool
) -> dict[str, Any]:
    boot.write("start", version="synth", address="127.0.0.1:50051", level="full")
    for i, key in enumerate(KEYS, 1):
        boot.write("key_added", app="vehicle-sim", key=key, key_id=i)
    for app in ("dashboard", "slow"):
        boot.write("connect", app=app, stream="events", details="{}")
        for i, key in enumerate(KEYS, 1):
            boot.write(
                "register", app=app, key=key, key_id=i, queue=0, trigger="on_update", status="ok"
            )
    seq = {(app, k): 0 for app in ("dashboard", "slow") for k in range(1, len(KEYS) + 1)}
    version = dict.fromkeys(range(1, len(KEYS) + 1), 0)
    quiet = min(2000, ticks // 3)  # up to 20 s of a silent cabin temperature
    silent = range(ticks // 3, ticks // 3 + quiet)
    facts["stale_intervals"] += 1 if quiet > 1 else 0
    facts["stale_gap_min_s"] = min(facts["stale_gap_min_s"], (quiet + 1) * TICK_NS / 1e9)
    lost_once = ticks // 2
    for tick in range(ticks):
        boot.t += TICK_NS
        if tick == lost_once:
            boot.skip(7)
            boot.write("journal_dropped", count=7, cause="buffer full")
            facts["missing_journal_records"] += 7
        for i, key in enumerate(KEYS, 1):
            if key == STALE_KEY and tick in silent:
                continue
            version[i] += 1
            boot.write(
                "publish",
                key=key,
                key_id=i,
                version=version[i],
                changed=True,
                size=8,
                writer="vehicle-sim",
            )
            for app in ("dashboard", "slow"):
                seq[(app, i)] += 1
                s = seq[(app, i)]
                if app == "slow" and rng.random() < 0.3:
                    boot.write(
                        "evicted", app=app, key=key, key_id=i, queue=0, seq=s, reason="queue full"
                    )
                    facts["dropped"] += 1
                    continue
                boot.write("queued", app=app, key_id=i, queue=0, seq=s)
                boot.write(
                    "delivered",
                    app=app,
                    key_id=i,
                    seq=s,
                    queue=0,
                    write_time_ns=boot.t,
                    sent_ns=boot.t + 200_000,
                )
                facts["delivered"] += 1
    if not crash:
        boot.write("stop", reason="shutdown")
    return {}


def _tamper(path: Path, rng: random.Random) -> dict[str, Any]:
    lines = path.read_bytes().splitlines(keepends=True)
    i = len(lines) // 2
    while b'"kind":"publish"' not in lines[i]:
        i += 1
    import json

    offset = json.loads(lines[i])["offset"]
    lines[i] = lines[i].replace(b'"changed":true', b'"changed":false')
    path.write_bytes(b"".join(lines))
    return {"file": path.name, "offset": offset}
