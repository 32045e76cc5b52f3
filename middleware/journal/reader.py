"""Read journal segments back and check them: torn lines, offsets, the hash chain.

The PySpark analysis reads journals at fleet scale; this reader is for one
vehicle: tests, ``python -m middleware journal verify DIR``, and engineers.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from middleware.journal.chain import OFFSET_MOD, record_hash
from middleware.journal.writer import segment_files

__all__ = ["BootReport", "JournalReport", "read_journal", "verify"]


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
    """What ``journal_dropped`` records say was dropped."""


@dataclass
class JournalReport:
    torn_lines: list[str] = field(default_factory=list)
    """``file:line`` of lines that are not whole JSON records (a crash's torn tail)."""
    boots: dict[str, BootReport] = field(default_factory=dict)

    @property
    def intact(self) -> bool:
        return all(b.first_broken_link is None for b in self.boots.values())


def _lines(path: Path) -> Iterator[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            yield from fh
    except (EOFError, gzip.BadGzipFile, OSError):
        return  # a gzip member cut by a crash: what was flushed before it was yielded


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
        for number, line in enumerate(_lines(path), 1):
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


def verify(records: Iterable[dict[str, Any]], report: JournalReport | None = None) -> JournalReport:
    """Check offsets and the hash chain of each boot, in the order given."""
    report = report or JournalReport()
    last_hash: dict[str, str] = {}
    last_offset: dict[str, int] = {}
    for rec in records:
        boot = str(rec.get("boot_id", ""))
        b = report.boots.setdefault(boot, BootReport(boot))
        b.records += 1
        offset = int(rec.get("offset", -1))
        if rec.get("kind") == "journal_dropped":
            b.reported_dropped += int(rec.get("count", 0))
        if boot in last_offset:
            gap = (offset - last_offset[boot] - 1) % OFFSET_MOD
            if gap < OFFSET_MOD // 2:
                b.offset_gaps += gap
        last_offset[boot] = offset
        if b.first_broken_link is None:
            if rec.get("prev_hash") != last_hash.get(boot, ""):
                b.first_broken_link, b.broken_reason = offset, "prev_hash does not match"
            elif rec.get("hash") != record_hash(rec):
                b.first_broken_link, b.broken_reason = offset, "hash does not match the record"
        last_hash[boot] = str(rec.get("hash", ""))
    return report
