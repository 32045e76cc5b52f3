"""Read journal segments back and check them: torn lines, offsets, the hash chain.

The PySpark analysis reads journals at fleet scale; this reader is for one
vehicle: tests, ``python -m vehicle_middleware.server journal verify DIR``, and engineers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, hash_checks
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.contract.journal.segments import lines, segment_files

__all__ = ["BootReport", "JournalReport", "read_journal", "trim_anchors", "verify"]


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


def verify(records: Iterable[dict[str, Any]], report: JournalReport | None = None) -> JournalReport:
    """Check offsets, the hash chain and the loss reports of each boot, in the order given.

    A boot's first record may link to a removed one only where a
    ``journal_trimmed`` record says retention removed it; anywhere else a link
    that does not check is a broken chain (an edited, deleted or reordered
    record).
    """
    records = list(records)
    report = report or JournalReport()
    anchors = trim_anchors(records)
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
            target.reported_dropped += int(rec.get("count", 0))
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
    return report
