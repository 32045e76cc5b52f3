"""What the collector holds of one vehicle: its position, the records received but
not landed yet, the collector records to write, and its counts.

Every record is verified as it arrives (its hash over its own bytes, and its
chain link to the record before it, by :mod:`vehicle_middleware.contract.journal.chain`); a
record that fails is still landed (the analysis then flags the broken chain)
and counted. A recovery answer (records the middleware no longer holds, a
restart into a new boot) becomes ``collect_gap`` and ``collect_restart``
records. :meth:`Vehicle.flush` lands it all by the protocol of
:mod:`vehicle_middleware.telemetry_export.positions`. No I/O but the landing area's; no gRPC calls.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Final

from vehicle_middleware.contract.journal import landing as layout
from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance, pred, succ, verify_line
from vehicle_middleware.contract.journal.landing import CollectorKind
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as pb
from vehicle_middleware.telemetry_export.errors import CollectError
from vehicle_middleware.telemetry_export.landing_area import Landing
from vehicle_middleware.telemetry_export.positions import Position, load_position, save_position

__all__ = ["Counts", "Vehicle"]

log = logging.getLogger(__name__)

_HALF: Final = OFFSET_MOD // 2
_REASON_OF: Final = {
    pb.RECOVERY_REASON_CUT_LOOSE: "consumer cut loose",
    pb.RECOVERY_REASON_NOT_IN_HISTORY: "history overrun",
    pb.RECOVERY_REASON_BOOT_NOT_HELD: "middleware restarted before they were read",
    pb.RECOVERY_REASON_BOOT_ENDED: "middleware restarted before they were read",
}


@dataclass(slots=True)
class Counts:
    records: int = 0
    """Records landed."""
    files: int = 0
    gaps: int = 0
    """collect_gap records written."""
    gap_offsets: int = 0
    restarts: int = 0
    bad_hash: int = 0
    broken_links: int = 0
    duplicates: int = 0
    """Records received again (at or before the position): not landed twice."""


class Vehicle:
    """What the collector holds of one vehicle: its position, and what is not landed yet."""

    def __init__(self, vehicle_id: str, address: str, owner: str, position: Position) -> None:
        self.vehicle_id = vehicle_id
        self.address = address
        self.owner = owner
        self.landed = position
        """The position on the landing area."""
        self.at = position.copy()
        """The position including what is buffered."""
        self._parts: list[tuple[str, int, list[bytes]]] = []  # (boot, first offset, lines)
        self._notes: list[dict[str, Any]] = []  # collector records to land
        self.buffered = 0
        self.buffered_since = 0.0
        self.boot_stopped = False
        """A ``stop`` record is buffered: the boot is over, nothing to wait for."""
        self.counts = Counts()
        self.newest: tuple[str, int] | None = None
        self.state = "connecting"
        self.drained = False
        self.saved_at = time.monotonic()

    # -- what arrives ----------------------------------------------------------------------

    def take_records(self, records: pb.Records) -> None:
        """Verify and buffer records; see the module docstring for what fails."""
        self.newest = (records.newest_boot_id, records.newest_offset)
        boot = records.boot_id
        if boot != self.at.boot_id:
            # Not announced by a recovery (only on a first contact): a new boot.
            self._enter(boot, restarted=bool(self.at.boot_id))
        at = self.at
        for line in records.lines:
            try:
                rec = verify_line(line)
            except ValueError as e:
                try:
                    rec = json.loads(line)
                    offset = int(rec["offset"])
                except (ValueError, KeyError, TypeError):
                    log.error("collect: %s: a line that is not a record (%s): dropped", self, e)
                    continue
                self.counts.bad_hash += 1
                log.error("collect: %s: record %d of boot %s: %s", self, offset, boot, e)
            offset = int(rec["offset"])
            if at.hash is not None and distance(offset, at.offset) < _HALF:
                self.counts.duplicates += 1  # at or before the position: landed already
                continue
            if at.hash is not None and rec.get("prev_hash") != at.hash:
                self.counts.broken_links += 1
                log.error(
                    "collect: %s: record %d of boot %s does not link to the record before it "
                    "(its prev_hash is not that record's hash): landed, the analysis will flag it",
                    self,
                    offset,
                    boot,
                )
            self._add(boot, offset, line)
            at.offset, at.hash = offset, str(rec.get("hash", ""))
            if rec.get("kind") == Kind.STOP:
                self.boot_stopped = True  # the boot's last record: land it now
        at.offset = records.last_offset

    def take_recovery(self, rec: pb.Recovery) -> None:
        """Record what a recovery answer says could not be collected; move to where it says."""
        at = self.at
        lost_here = [x for x in rec.lost if x.boot_id not in at.done_boots]
        if rec.boot_id == at.boot_id:
            if distance(pred(rec.n0), at.offset) <= distance(pred(rec.n0), rec.n1):
                return  # it offers what we hold already: keep our position (and chain)
            # Same boot: everything from after our position to before n0 is gone.
            start, end = succ(at.offset), pred(rec.n0)
            if at.boot_id and distance(start, end) < _HALF:
                cut = [x for x in lost_here if x.boot_id == at.boot_id]
                self._gap(at.boot_id, start, end, cut[0].reason if cut else _REASON_OF[rec.reason])
            lost_here = [x for x in lost_here if x.boot_id != at.boot_id]
        else:
            for x in lost_here:
                if x.boot_id == rec.boot_id:
                    continue  # the new boot's loss shows as its own recovery range
                start = x.from_offset
                if x.boot_id == at.boot_id and 0 < distance(start, succ(at.offset)) < _HALF:
                    start = succ(at.offset)
                self._gap(x.boot_id, start, x.to_offset, x.reason)
            if (
                at.boot_id
                and not any(x.boot_id == at.boot_id for x in lost_here)
                and (rec.reason == pb.RECOVERY_REASON_BOOT_NOT_HELD)
            ):
                log.warning(
                    "collect: %s: boot %s is no longer held by the middleware: what it wrote "
                    "after offset %d is unknown (not recorded as a gap)",
                    self,
                    at.boot_id,
                    at.offset,
                )
            self._enter(rec.boot_id, restarted=bool(at.boot_id))
            lost_here = []
        at.boot_id, at.offset = rec.boot_id, pred(rec.n0)
        at.hash = None  # the chain resumes after a gap: the next record starts it
        log.warning("collect: %s: recovery: %s", self, rec.message)

    def _enter(self, boot: str, *, restarted: bool) -> None:
        at = self.at
        if restarted and at.boot_id and at.boot_id not in at.done_boots:
            self._notes.append(
                {
                    "kind": CollectorKind.RESTART.value,
                    "vehicle_id": self.vehicle_id,
                    "old_boot_id": at.boot_id,
                    "new_boot_id": boot,
                    "time_ns": time.time_ns(),
                    "collector": self.owner,
                }
            )
            self.counts.restarts += 1
            at.done_boots = [*at.done_boots, at.boot_id][-32:]
            log.info("collect: %s: the middleware restarted: boot %s -> %s", self, at.boot_id, boot)
        at.boot_id, at.hash = boot, None

    def _gap(self, boot: str, start: int, end: int, reason: str) -> None:
        count = distance(start, end) + 1
        self._notes.append(
            {
                "kind": CollectorKind.GAP.value,
                "vehicle_id": self.vehicle_id,
                "boot_id": boot,
                "from_offset": start,
                "to_offset": end,
                "count": count,
                "reason": reason,
                "time_ns": time.time_ns(),
                "collector": self.owner,
            }
        )
        self.counts.gaps += 1
        self.counts.gap_offsets += count
        log.warning(
            "collect: %s: offsets %d..%d of boot %s (%d) not collected: %s",
            self,
            start,
            end,
            boot,
            count,
            reason,
        )

    def _add(self, boot: str, offset: int, line: bytes) -> None:
        if not self._parts or self._parts[-1][0] != boot:
            self._parts.append((boot, offset, []))
        self._parts[-1][2].append(line)
        if not self.buffered:
            self.buffered_since = time.monotonic()
        self.buffered += 1

    def discard(self) -> None:
        """Forget what is not landed (it will be received again)."""
        self._parts, self._notes, self.buffered = [], [], 0
        self.at = self.landed.copy()

    @property
    def dirty(self) -> bool:
        """Whether something is not landed yet (records, collector records, a new position)."""
        return bool(self._parts or self._notes) or self.at != self.landed

    # -- landing -----------------------------------------------------------------------------

    def flush(self, landing: Landing, *, heartbeat_s: float | None = None) -> None:
        """Land what is buffered and the position after it (blocking: run in a thread).

        With nothing to land, the position is written again when ``heartbeat_s``
        passed since it was last written: the lease another collector respects.

        Raises:
            CollectError: another collector took the vehicle over (its position
                names another owner): this one must stop following it.
        """
        due = heartbeat_s is not None and time.monotonic() - self.saved_at >= heartbeat_s
        if not self.dirty and not due:
            return
        held = load_position(landing, self.vehicle_id)
        if held is not None and held.owner != self.owner:
            raise CollectError(
                f"vehicle {self.vehicle_id!r} was taken over by collector {held.owner!r}; "
                "this one stops following it"
            )
        self.saved_at = time.monotonic()
        after = self.at.copy()
        files = self.landed.files
        moves: list[tuple[str, str]] = []
        writes: list[tuple[str, bytes]] = []
        vehicle = self.vehicle_id
        for boot, first, lines in self._parts:
            name = layout.data_path(vehicle, boot, first, files)
            writes.append((name, b"".join(lines)))
            files += 1
        if self._notes:
            name = layout.collector_path(vehicle, self.owner, time.time_ns())
            body = "".join(json.dumps(n, sort_keys=True) + "\n" for n in self._notes)
            writes.append((name, body.encode()))
        after.files = files
        for final, data in writes:
            tmp = layout.tmp_path(vehicle, final, self.owner)
            landing.write(tmp, data)
            moves.append((tmp, final))
        if moves:
            save_position(landing, self.vehicle_id, self.landed, self.owner, pending=(after, moves))
            for tmp, final in moves:
                landing.move(tmp, final)
        save_position(landing, self.vehicle_id, after, self.owner)
        self.counts.records += self.buffered
        self.counts.files += sum(1 for _, final in moves if layout.is_data_path(final))
        self._parts, self._notes, self.buffered = [], [], 0
        self.boot_stopped = False
        self.landed = after
        self.at = after.copy()

    def lag(self) -> str:
        if self.newest is None:
            return "lag unknown"
        boot, newest = self.newest
        if boot != self.at.boot_id:
            return f"in an earlier boot ({self.at.boot_id[:8]})"
        return f"lag {distance(self.at.offset, newest):,} records"

    def __str__(self) -> str:
        return self.vehicle_id
