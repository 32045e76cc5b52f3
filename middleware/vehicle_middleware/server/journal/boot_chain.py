"""The boots' chain: each boot's ``start`` names where the boot before it ended.

A boot's records are hash-chained to one another, but a boot's tail (or a
whole boot) removed from disk leaves a chain that still checks. So the
journal chains its boots too: a boot's ``start`` record carries the boot
that wrote the directory before it (``prev_boot_id``), the offset and hash of
the last record that boot wrote (``prev_boot_offset``, ``prev_boot_hash``),
and whether that was its ``stop`` (``prev_boot_stopped``). Where that boot
ended is taken from its loss marker (:class:`~.reserve.MarkerState`: the
writer's own word, kept current as it writes), else from its last segment.

``journal verify`` then holds each boot's records to what names its end: the
next boot's ``start``, or, for the newest boot, the marker. A boot whose
named last record is not on disk lost its tail; one with no record left and
no ``journal_trimmed`` record saying retention removed it was removed. A
clean stop whose ``stop`` is gone reads as a cut tail, never as a crash.

The marker is written after each batch reaches the file (at most every 0.5 s
while records come), so for a boot that did not stop cleanly the named end is
a lower bound: records written after it are not missing. A boot that stopped
cleanly ends exactly there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.contract.journal.segments import last_record, segment_boot, segment_files
from vehicle_middleware.server.journal.reserve import MarkerState

__all__ = ["BootEnd", "missing_after", "previous_end"]

log = logging.getLogger(__name__)

_HALF = OFFSET_MOD // 2


@dataclass(frozen=True, slots=True)
class BootEnd:
    """Where a boot ended, as its marker (or its last segment) says."""

    boot_id: str
    offset: int | None
    """Its last record written (None: it wrote none)."""
    hash: str
    stopped: bool
    """That record is its ``stop``."""

    def start_fields(self) -> dict[str, Any]:
        """The ``start`` record's fields that name this end."""
        return {
            "prev_boot_id": self.boot_id,
            "prev_boot_offset": self.offset,
            "prev_boot_hash": self.hash,
            "prev_boot_stopped": self.stopped,
        }


def missing_after(last: int | None, end: int | None) -> int:
    """Records missing from a boot whose last record on disk is ``last`` (None: none),
    when its end is named at ``end``: 0 when ``last`` is at or after it."""
    if end is None:
        return 0
    if last is None:
        return -1  # all of it: the caller says "every record"
    gap = distance(last, end)
    return gap if 0 < gap < _HALF else 0


def previous_end(directory: Path, marker: MarkerState | None, boot_id: str) -> BootEnd | None:
    """Where the boot that wrote ``directory`` before ``boot_id`` ended: by its marker when
    it names its last record, else by its newest segment; None for a directory no boot
    wrote. Logs an error when the marker names records its segments no longer hold
    (removed while no middleware ran)."""
    files = [p for p in segment_files(directory) if segment_boot(p) != boot_id]
    if marker is not None and marker.boot_id != boot_id and marker.chained:
        if marker.last_offset is None:  # it wrote nothing (a full disk from its start)
            return BootEnd(marker.boot_id, None, "", False)
        end = BootEnd(marker.boot_id, marker.last_offset, marker.last_hash, marker.stopped)
        on_disk = last_record([p for p in files if segment_boot(p) == marker.boot_id])
        last = None if on_disk is None else int(on_disk.get("offset", 0))
        lost = missing_after(last, end.offset)
        if lost:
            log.error(
                "journal: the previous boot %s wrote up to offset %d%s, but %s; the "
                "journal records where it ended, and journal verify reports what is missing",
                end.boot_id,
                end.offset,
                " (its stop record)" if end.stopped else "",
                "none of its records are left"
                if last is None
                else f"its records after offset {last} ({lost}) are gone",
            )
        return end
    if not files:
        return None
    newest = segment_boot(files[-1]) or ""
    rec = last_record([p for p in files if segment_boot(p) == newest])
    if rec is None:
        return BootEnd(newest, None, "", False)
    return BootEnd(
        newest, int(rec.get("offset", 0)), str(rec.get("hash", "")), rec.get("kind") == Kind.STOP
    )
