"""Read journal segments back and check them: torn lines, offsets, the hash chain.

The PySpark analysis reads journals at fleet scale; this reader is for one
vehicle: tests, ``python -m vehicle_middleware.server journal verify DIR``, and engineers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance, hash_checks, succ
from vehicle_middleware.contract.journal.records import Cause, Kind
from vehicle_middleware.contract.journal.segments import lines, segment_files

__all__ = ["BootEnd", "BootReport", "JournalReport", "read_journal", "trim_anchors", "verify"]


@dataclass(frozen=True, slots=True)
class BootEnd:
    """Where a boot ended, as the next boot's ``start`` (or the directory's marker) names
    it (see :mod:`vehicle_middleware.server.journal.boot_chain`)."""

    offset: int | None
    """Its last record written (None: it wrote none)."""
    hash: str
    stopped: bool
    """That record is its ``stop``: the boot ends exactly there (else: at least there)."""
    by: str
    """What names it, for the report: ``the start of boot B``, or the marker file."""


@dataclass
class BootReport:
    """What one boot's records say about themselves."""

    boot_id: str
    records: int = 0
    first_broken_link: int | None = None
    """Offset of the first record whose ``prev_hash`` or ``hash`` does not check."""
    broken_reason: str = ""
    offset_gaps: int = 0
    """Records missing between offsets (lost, or dropped by the buffer)."""
    reported_dropped: int = 0
    """What ``journal_dropped`` records say was dropped (this boot's, and a later boot's
    ``lost_boot_id`` reports for it)."""
    stopped: bool = False
    """Whether the boot wrote its ``stop`` record (else: killed, crashed, or still running)."""
    trimmed_files: int = 0
    """Segments retention removed from the start of this boot (its chain starts later)."""
    trimmed_bytes: int = 0
    end: BootEnd | None = None
    """Where it ended, as named by what followed it (None: nothing names it)."""
    end_seen: bool = False
    """Its record at ``end.offset`` is held, with ``end.hash``."""
    end_other: bool = False
    """A record at ``end.offset`` is held, with another hash."""
    last_offset: int | None = None
    """The offset of its last record held."""
    removed_with_directory: int = 0
    """Records of it that went with its directory, removed while it ran (a
    ``journal_dropped`` record, ``directory removed``, in the directory made again)."""
    stop_unwritten: bool = False
    """It stopped cleanly but its ``stop`` did not reach disk (a full disk): a later boot
    reported its unwritten records as ``write failed``, not lost in a crash."""

    @property
    def removed(self) -> bool:
        """Its end is named but none of its records is held, and no ``journal_trimmed``
        record says retention removed them: the boot was removed."""
        return (
            self.end is not None
            and self.end.offset is not None
            and self.records == 0
            and self.trimmed_files == 0
        )

    @property
    def tail_missing(self) -> str:
        """What is missing from its end ("" when nothing): the records after its last
        held one up to the end named, or the named last record replaced."""
        end = self.end
        if end is None or end.offset is None or self.records == 0 or self.end_seen:
            return ""
        if self.end_other:
            return f"its record at offset {end.offset} is not the one {end.by} names (another hash)"
        last = self.last_offset if self.last_offset is not None else end.offset
        gap = distance(last, end.offset)
        if 0 < gap < OFFSET_MOD // 2:
            return (
                f"offsets {succ(last)}..{end.offset} ({gap} records) are gone: {end.by} "
                f"says it ended at offset {end.offset}"
                + (" with its stop record" if end.stopped else " or later")
            )
        return f"its record at offset {end.offset}, which {end.by} names as its last, is gone"

    @property
    def unreported(self) -> int:
        """Records missing by offset that no ``journal_dropped`` record accounts for."""
        return max(0, self.offset_gaps - self.reported_dropped)


@dataclass
class JournalReport:
    torn_lines: list[str] = field(default_factory=list)
    """``file:line`` of lines that are not whole JSON records (a crash's torn tail)."""
    boots: dict[str, BootReport] = field(default_factory=dict)

    @property
    def intact(self) -> bool:
        """No broken link in any boot's chain."""
        return all(b.first_broken_link is None for b in self.boots.values())

    @property
    def complete(self) -> bool:
        """Every record missing by offset is reported by a ``journal_dropped`` record."""
        return all(b.unreported == 0 for b in self.boots.values())

    @property
    def whole(self) -> bool:
        """No boot lost its tail or was removed, by what names each boot's end."""
        return not any(b.removed or b.tail_missing for b in self.boots.values())


def read_journal(
    paths: Iterable[Path], report: JournalReport | None = None
) -> list[dict[str, Any]]:
    """Records of the given segment files (or directories), in written order.

    Torn or unparsable lines are skipped and listed in ``report.torn_lines``.
    """
    files: list[Path] = []
    for p in paths:
        files.extend(segment_files(p) if p.is_dir() else [p])
    records: list[dict[str, Any]] = []
    for path in files:
        for number, line in enumerate(lines(path), 1):
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("no newline: torn")
                rec = json.loads(line)
                if not isinstance(rec, dict) or "kind" not in rec:
                    raise ValueError("not a record")
            except ValueError:
                if report is not None:
                    report.torn_lines.append(f"{path.name}:{number}")
                continue
            records.append(rec)
    return records


def trim_anchors(records: Iterable[dict[str, Any]]) -> dict[tuple[str, int], str]:
    """``(boot_id, kept_offset) -> kept_prev_hash`` of every ``journal_trimmed`` record.

    A boot whose first records retention removed starts its chain at
    ``kept_offset`` with that ``prev_hash``: a start a verifier accepts.
    """
    anchors: dict[tuple[str, int], str] = {}
    for rec in records:
        if rec.get("kind") == Kind.JOURNAL_TRIMMED and rec.get("kept_offset") is not None:
            boot = str(rec.get("trimmed_boot_id", ""))
            anchors[(boot, int(rec["kept_offset"]))] = str(rec.get("kept_prev_hash", ""))
    return anchors


def boot_ends(records: Iterable[dict[str, Any]]) -> dict[str, BootEnd]:
    """Per boot, where it ended as a later boot's ``start`` names it."""
    ends: dict[str, BootEnd] = {}
    for rec in records:
        if rec.get("kind") == Kind.START and rec.get("prev_boot_id"):
            offset = rec.get("prev_boot_offset")
            ends[str(rec["prev_boot_id"])] = BootEnd(
                None if offset is None else int(offset),
                str(rec.get("prev_boot_hash") or ""),
                bool(rec.get("prev_boot_stopped")),
                f"the start of boot {rec.get('boot_id', '')}",
            )
    return ends


def verify(
    records: Iterable[dict[str, Any]],
    report: JournalReport | None = None,
    *,
    ends: Mapping[str, BootEnd] | None = None,
) -> JournalReport:
    """Check offsets, the hash chain and the loss reports of each boot, in the order given,
    and each boot's records against where it ended.

    A boot's first record may link to a removed one only where a
    ``journal_trimmed`` record says retention removed it; anywhere else a link
    that does not check is a broken chain (an edited, deleted or reordered
    record). A boot's end is named by the next boot's ``start``, or by
    ``ends`` (the directory's marker, for the newest boot): a boot whose named
    last record is not held lost its tail (:attr:`BootReport.tail_missing`),
    one with no record held and no ``journal_trimmed`` for it was removed
    (:attr:`BootReport.removed`).
    """
    records = list(records)
    report = report or JournalReport()
    anchors = trim_anchors(records)
    named = {**(ends or {}), **boot_ends(records)}
    last_hash: dict[str, str] = {}
    last_offset: dict[str, int] = {}
    for rec in records:
        boot = str(rec.get("boot_id", ""))
        b = report.boots.setdefault(boot, BootReport(boot))
        b.records += 1
        offset = int(rec.get("offset", -1))
        kind = rec.get("kind")
        if kind == Kind.JOURNAL_DROPPED:
            lost_boot = str(rec.get("lost_boot_id") or boot)
            target = report.boots.setdefault(lost_boot, BootReport(lost_boot))
            if rec.get("cause") == Cause.REMOVED:  # before what is held, not a gap in it
                target.removed_with_directory += int(rec.get("count", 0))
            else:
                target.reported_dropped += int(rec.get("count", 0))
            if lost_boot != boot and rec.get("cause") == Cause.WRITE:
                target.stop_unwritten = True
        elif kind == Kind.JOURNAL_TRIMMED:
            t_boot = str(rec.get("trimmed_boot_id", ""))
            target = report.boots.setdefault(t_boot, BootReport(t_boot))
            target.trimmed_files += int(rec.get("files", 0))
            target.trimmed_bytes += int(rec.get("bytes", 0))
        elif kind == Kind.STOP:
            b.stopped = True
        if boot in last_offset:
            gap = (offset - last_offset[boot] - 1) % OFFSET_MOD
            if gap < OFFSET_MOD // 2:
                b.offset_gaps += gap
        if b.first_broken_link is None:
            prev = rec.get("prev_hash")
            if boot in last_hash:
                expected = last_hash[boot]
            elif prev and anchors.get((boot, offset)) == prev:
                expected = str(prev)  # retention removed what came before: recorded, accepted
            else:
                expected = ""
            if prev != expected:
                b.first_broken_link, b.broken_reason = (
                    offset,
                    (
                        "prev_hash does not match"
                        if boot in last_hash
                        else "the chain's start is missing (records before it were removed, "
                        "and no journal_trimmed record says retention did it)"
                    ),
                )
            elif not hash_checks(rec):
                b.first_broken_link, b.broken_reason = offset, "hash does not match the record"
        last_offset[boot] = offset
        last_hash[boot] = str(rec.get("hash", ""))
        b.last_offset = offset
        end = named.get(boot)
        if end is not None and end.offset == offset:
            if rec.get("hash") == end.hash:
                b.end_seen = True
            else:
                b.end_other = True
    for boot_id, end in named.items():
        report.boots.setdefault(boot_id, BootReport(boot_id)).end = end
    return report
