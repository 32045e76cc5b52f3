"""Position files: where the collector stands per vehicle, on the landing area.

``LANDING/_positions/vehicle=V.json`` holds the boot, the offset and the last
record's hash up to which everything is landed, the number of files written,
the boots moved past, and who holds the vehicle (its name and a heartbeat: a
lease another collector respects, or takes over with ``--take-over``).

No duplicate, no gap, across kills: a flush
(:meth:`vehicle_middleware.telemetry_export.vehicle_state.
Vehicle.flush`) writes its files under ``_tmp/``, then the position with the
renames it is about to do ("pending"), then renames, then the position without
them. A collector that restarts completes a pending flush first
(:func:`complete_pending`), then asks the middleware for the records after its
position.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from vehicle_middleware.contract.journal import landing as layout
from vehicle_middleware.telemetry_export.landing_area import Landing

__all__ = ["Position", "PositionFile", "complete_pending", "load_position", "save_position"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Position:
    """Where the collector stands for one vehicle: everything up to here is landed."""

    boot_id: str = ""
    offset: int = 0
    hash: str | None = None
    """The last landed record's hash: the next record's prev_hash (None: not known)."""
    files: int = 0
    """Files landed for the vehicle (numbers the next one)."""
    done_boots: list[str] = field(default_factory=list)
    """Boots the collector has moved past (their gaps are recorded), the newest last."""

    def copy(self) -> Position:
        return dataclasses.replace(self, done_boots=list(self.done_boots))


@dataclass(slots=True)
class PositionFile:
    """A vehicle's position file: the position, who holds the vehicle, and a flush
    that was under way (its renames) when the collector stopped."""

    position: Position
    owner: str
    heartbeat_ns: int
    pending: list[tuple[str, str]]


def load_position(landing: Landing, vehicle: str) -> PositionFile | None:
    """The vehicle's position file, or None."""
    data = landing.read_replaced(layout.position_path(vehicle))
    if data is None:
        return None
    doc = json.loads(data)
    pending = doc.get("pending") or {}
    state = pending.get("state", doc)
    position = Position(
        boot_id=str(state.get("boot_id", "")),
        offset=int(state.get("offset", 0)),
        hash=state.get("hash"),
        files=int(state.get("files", 0)),
        done_boots=[str(b) for b in state.get("done_boots", [])],
    )
    if not pending:
        position = Position(
            boot_id=str(doc.get("boot_id", "")),
            offset=int(doc.get("offset", 0)),
            hash=doc.get("hash"),
            files=int(doc.get("files", 0)),
            done_boots=[str(b) for b in doc.get("done_boots", [])],
        )
    return PositionFile(
        position,
        str(doc.get("owner", "")),
        int(doc.get("heartbeat_ns", 0)),
        [(str(a), str(b)) for a, b in pending.get("moves", [])],
    )


def save_position(
    landing: Landing,
    vehicle: str,
    position: Position,
    owner: str,
    *,
    pending: tuple[Position, list[tuple[str, str]]] | None = None,
) -> None:
    doc: dict[str, Any] = {"vehicle_id": vehicle, "owner": owner, "heartbeat_ns": time.time_ns()}
    doc |= dataclasses.asdict(position)
    if pending is not None:
        state, moves = pending
        doc["pending"] = {"state": dataclasses.asdict(state), "moves": moves}
    landing.replace(layout.position_path(vehicle), json.dumps(doc, sort_keys=True).encode())


def complete_pending(landing: Landing, vehicle: str, held: PositionFile, owner: str) -> None:
    """Finish a flush a killed collector left: its files were whole under ``_tmp``."""
    if not held.pending:
        return
    for tmp, final in held.pending:
        if not landing.exists(final) and landing.exists(tmp):
            landing.move(tmp, final)
    save_position(landing, vehicle, held.position, owner)
    log.info("collect: %s: completed the flush a stopped collector left", vehicle)
