"""Segment files: their names, and reading their lines back.

A segment is ``journal-<start ns, 20 digits>-<boot_id>-<n, 6 digits>.jsonl``
(``.jsonl.gz`` when compressed: one gzip member per batch of lines, which any
gzip reader reads as one stream). Names sort by time, so a directory's
segments sort oldest first.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

__all__ = [
    "first_record",
    "last_offset",
    "last_record",
    "lines",
    "segment_boot",
    "segment_files",
    "segment_name",
]

_NAME: Final = re.compile(r"^journal-(\d{20})-(.+)-(\d{6})\.jsonl(?:\.gz)?$")


def segment_name(started_ns: int, boot_id: str, number: int, *, compress: bool) -> str:
    suffix = ".jsonl.gz" if compress else ".jsonl"
    return f"journal-{started_ns:020d}-{boot_id}-{number:06d}{suffix}"


def segment_files(directory: Path) -> list[Path]:
    """The journal's segment files in ``directory``, oldest first (names sort by time)."""
    return sorted(p for p in directory.glob("journal-*.jsonl*") if p.is_file())


def segment_boot(path: Path) -> str | None:
    """The boot id in a segment's name, or None for a name that is not a segment's."""
    m = _NAME.match(path.name)
    return m.group(2) if m else None


def lines(path: Path) -> Iterator[bytes]:
    """The raw lines of a segment; a gzip member cut by a crash ends the file early."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            yield from fh
    except (EOFError, gzip.BadGzipFile, OSError):
        return  # what was flushed before the cut was yielded


def first_record(path: Path) -> dict[str, Any] | None:
    """The first whole record of a segment, or None."""
    for line in lines(path):
        try:
            rec = json.loads(line)
        except ValueError:
            return None
        return rec if isinstance(rec, dict) and line.endswith(b"\n") else None
    return None


def last_offset(paths: list[Path]) -> int | None:
    """The offset of the last whole record in the newest of ``paths`` that has one."""
    for path in reversed(paths):
        last: int | None = None
        for line in lines(path):
            if not line.endswith(b"\n"):
                continue
            try:
                last = int(json.loads(line)["offset"])
            except (ValueError, KeyError, TypeError):
                continue
        if last is not None:
            return last
    return None


_TAIL_BYTES: Final = 256 * 1024


def _tail_record(path: Path) -> dict[str, Any] | None:
    """The last whole record in the last ``_TAIL_BYTES`` of an uncompressed segment."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.split(b"\n")[:-1]):  # the last piece has no newline
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn line, or the chunk's cut first line
        if isinstance(rec, dict) and "offset" in rec:
            return rec
    return None


def last_record(paths: list[Path]) -> dict[str, Any] | None:
    """The last whole record in the newest of ``paths`` that has one, or None (an
    uncompressed segment is read from its end)."""
    for path in reversed(paths):
        if path.suffix != ".gz" and (found := _tail_record(path)) is not None:
            return found
        last: dict[str, Any] | None = None
        for line in lines(path):
            if not line.endswith(b"\n"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and "offset" in rec:
                last = rec
        if last is not None:
            return last
    return None
