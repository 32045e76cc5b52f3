"""Retention: which segments go when the journal outgrows ``max_bytes``, and what
the journal records about it first.

When the directory holds more than ``max_bytes`` of segments, the oldest go
(never the one being written), and a ``journal_trimmed`` record per boot
whose segments went says where that boot's chain now starts (``kept_offset``,
``kept_prev_hash``), so a verifier tells retention from tampering.

With a :class:`RetentionGuard` (the journal's feed,
:mod:`vehicle_middleware.server.journal.feed`) retention keeps what registered consumers
have not acknowledged, within their bound, and a ``consumer_cut`` record says
what a consumer beyond it lost (:mod:`vehicle_middleware.server.journal.pinning`).

The writer thread runs one pass after each rotation: :meth:`Retention.plan`
decides (and applies the consumers' cuts), the writer writes the pass's
records (:class:`Trim`), then :meth:`Retention.remove` removes the segments.
The records reach the file before any segment goes, so a crash in between
leaves at worst a record of a trim not yet done (harmless), never a trim no
record explains (a false tamper alarm).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vehicle_middleware.contract.journal.segments import first_record, segment_boot, segment_files
from vehicle_middleware.server.journal.pinning import Cut, Plan

__all__ = ["Retention", "RetentionGuard", "Trim"]

log = logging.getLogger(__name__)


class RetentionGuard(Protocol):
    """What retention asks before removing segments (the journal's feed); ``tick`` is
    called often by the writer thread (after each write, and when idle) and is cheap."""

    def plan_retention(self, max_bytes: int, current: Path | None) -> tuple[Plan, int]: ...

    def apply_cuts(self, decided: Plan) -> Sequence[Cut]: ...

    def tick(self) -> None: ...

    def removed(self, paths: Sequence[Path]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Trim:
    """One retention pass: the segments it removes and the records that say so."""

    boot_id: str
    """The writing boot's."""
    files: list[Path]
    """The segments when the pass began, oldest first (the last: the one being written)."""
    removed: dict[str, list[Path]]
    """The segments that go, by boot."""
    sizes: dict[Path, int]
    cuts: Sequence[Cut]
    """The consumers' cuts applied, each with what the consumer lost."""

    @property
    def gone(self) -> list[Path]:
        """Every segment that goes, in name order."""
        return sorted({p for ps in self.removed.values() for p in ps})

    def consumer_cuts(self) -> Iterator[dict[str, Any]]:
        """The fields of a ``consumer_cut`` record per range a consumer lost."""
        for cut in self.cuts:
            for lost in cut.lost:
                yield {
                    "app": cut.pin.app,
                    "component": cut.pin.component,
                    "lost_boot_id": lost.boot_id,
                    "from_offset": lost.from_offset,
                    "to_offset": lost.to_offset,
                    "count": lost.count,
                    "reason": f"{cut.lag_bytes} bytes unacknowledged, beyond the consumer "
                    "bound (journal_consumer_max_lag_bytes)",
                }

    def boots(self) -> list[str]:
        """The boots whose segments go, the writing boot's first: if its chain now
        starts in the segment just opened, its ``journal_trimmed`` record is that
        segment's first record."""
        return sorted(self.removed, key=lambda b: b != self.boot_id)

    def trimmed(self, boot: str, fresh: dict[str, Any] | None) -> dict[str, Any]:
        """The fields of ``boot``'s ``journal_trimmed`` record.

        ``fresh``: the offset and ``prev_hash`` the writer gives its next record
        while the segment being written is still empty, else None. A boot whose
        first kept segment is that one starts there; any other starts at its
        first kept segment's first record (none kept: ``kept_offset`` None).
        """
        gone = {p for ps in self.removed.values() for p in ps}
        rest = [p for p in self.files if p not in gone and segment_boot(p) == boot]
        anchor: dict[str, Any] | None
        if rest and rest[0] == self.files[-1] and fresh is not None:
            anchor = fresh
        else:
            anchor = first_record(rest[0]) if rest else None
        return {
            "trimmed_boot_id": boot,
            "files": len(self.removed[boot]),
            "bytes": sum(self.sizes[p] for p in self.removed[boot]),
            "kept_offset": None if anchor is None else anchor.get("offset"),
            "kept_prev_hash": "" if anchor is None else anchor.get("prev_hash", ""),
        }


class Retention:
    """Retention of one journal directory, run by its writer thread."""

    def __init__(self, directory: Path, *, boot_id: str, max_bytes: int) -> None:
        self.directory = directory
        self.boot_id = boot_id
        self.max_bytes = max_bytes
        self.guard: RetentionGuard | None = None
        """Keeps what consumers have not acknowledged (set before the writer starts)."""
        self._held = ""  # consumers holding retention back, as last logged

    def plan(self) -> Trim | None:
        """The segments beyond ``max_bytes`` that go now (never the one being written),
        or None: nothing goes. With a guard, the cuts it plans are applied to its
        registry here, before the records that report them are written."""
        files = segment_files(self.directory)
        sizes = {p: p.stat().st_size for p in files}
        total = sum(sizes.values())
        removed: dict[str, list[Path]] = {}
        decided: Plan | None = None
        if self.guard is None:
            for p in files[:-1]:  # never the one being written
                if total <= self.max_bytes:
                    break
                total -= sizes[p]
                removed.setdefault(segment_boot(p) or "", []).append(p)
        else:
            decided, _ = self.guard.plan_retention(self.max_bytes, files[-1] if files else None)
            for seg in decided.remove:
                removed.setdefault(seg.boot_id, []).append(seg.path)
                sizes.setdefault(seg.path, seg.size)
            self._note_held(decided)
        if not removed:
            return None
        # The cuts go into the registry first, checked against the positions now (a
        # consumer may have acknowledged since the plan): a consumer_cut record says
        # only what a consumer really lost. (A crash before the records reach disk
        # leaves a cut the registry knows and its next recovery answer tells.)
        applied = (
            self.guard.apply_cuts(decided) if decided is not None and self.guard is not None else ()
        )
        return Trim(self.boot_id, files, removed, sizes, applied)

    def remove(self, trim: Trim) -> None:
        """Remove the pass's segments (after its records are written)."""
        gone = trim.gone
        for p in gone:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            log.info("journal retention removed %s", p.name)
        if self.guard is not None:
            self.guard.removed(gone)

    def _note_held(self, decided: Plan) -> None:
        """Log once per episode that consumers keep retention from going further."""
        held = ", ".join(sorted({f"{p.app}/{p.component}" for p in decided.held_by}))
        if held and held != self._held:
            log.warning(
                "journal: retention keeps segments beyond journal_max_bytes (%d) for consumers "
                "that have not acknowledged them: %s",
                self.max_bytes,
                held,
            )
        elif not held and self._held:
            log.info("journal: consumers no longer hold retention back")
        self._held = held
