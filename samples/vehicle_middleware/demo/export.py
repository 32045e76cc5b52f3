"""Did the export hold every record? The journal on the car's disk against the
landing area the collector wrote and the dataset the ingest wrote.

Each place is read as the records it holds, by ``(boot_id, offset)`` with
their ``hash``: the journal's segments (:mod:`vehicle_middleware.contract.journal.segments`),
the landing area's data files (``vehicle=V/boot=B/part-*.jsonl``, the landing
contract: :mod:`vehicle_middleware.contract.journal.landing`; ``_``/``.`` paths are the
collector's bookkeeping) and its
collector records (``collect_gap``, ``collect_restart``), and the Parquet
dataset's ``records`` table (one row per journal line, or per event of a batch
line: the line is the row with ``batch_index`` null or 0). :func:`compare` is
pure: it says what each place holds of the journal, what it holds twice,
altered, or that the journal never wrote, and which journal records did not
get through (none should: a middleware that stops cleanly hands its
followers its last record, ``stop``, before it exits).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vehicle_middleware.contract.journal import landing as layout
from vehicle_middleware.contract.journal.landing import CollectorKind
from vehicle_middleware.contract.journal.segments import lines, segment_files

__all__ = [
    "Collected",
    "ExportCheck",
    "Holdings",
    "Record",
    "check_export",
    "compare",
    "read_dataset",
    "read_journal_records",
    "read_landing",
]


@dataclass(frozen=True, slots=True)
class Record:
    """A journal record as a place holds it."""

    boot_id: str
    offset: int
    hash: str
    """Hex SHA-256, as in the journal's lines."""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Holdings:
    """What one place (the landing area, the dataset) holds of the journal."""

    copies: int
    """Records read there, a record held twice counted twice."""
    held: int
    """The journal's records held there, each with the journal's hash."""
    duplicated: int
    """Copies beyond the first of a record."""
    altered: int
    """Journal records held with another hash (some copy differs)."""
    foreign: int
    """Records the journal does not hold (another boot or offset)."""

    @property
    def clean(self) -> bool:
        return not (self.duplicated or self.altered or self.foreign)


@dataclass(frozen=True, slots=True)
class Collected:
    """What the collector says of itself (its JSON summary, one vehicle)."""

    landed: int
    """Records it landed."""
    files: int
    bad_hashes: int
    """Records whose hash did not check (landed anyway: the analysis flags them)."""
    broken_links: int
    failed: dict[str, str] = field(default_factory=dict)
    """Sources it could not collect, with why."""

    @classmethod
    def of(cls, summary: Mapping[str, Any], vehicle: str) -> Collected:
        """From the summary ``collect`` prints (``{"vehicles": {V: ...}, "failed": ...}``)."""
        v = summary.get("vehicles", {}).get(vehicle, {})
        return cls(
            landed=int(v.get("records", 0)),
            files=int(v.get("files", 0)),
            bad_hashes=int(v.get("bad_hash", 0)),
            broken_links=int(v.get("broken_links", 0)),
            failed=dict(summary.get("failed", {})),
        )

    def problems(self) -> list[str]:
        out = [f"the collector failed on {a}: {why}" for a, why in sorted(self.failed.items())]
        if self.bad_hashes:
            out.append(f"the collector received {self.bad_hashes:,} records whose hash fails")
        if self.broken_links:
            out.append(f"the collector received {self.broken_links:,} records that break the chain")
        return out


@dataclass(frozen=True, slots=True)
class ExportCheck:
    """The journal against the landing area and (unless the analysis was skipped) the dataset."""

    journal: int
    """Records in the journal on disk (every boot)."""
    landing: Holdings
    dataset: Holdings | None
    not_exported: dict[str, int] = field(default_factory=dict)
    """Journal records the last place (the dataset, else the landing area) lacks, by kind."""
    collect_gaps: int = 0
    """Offsets the collector recorded as not collected (``collect_gap`` records)."""
    collect_restarts: int = 0
    """``collect_restart`` records: the collector saw the middleware restart."""
    collected: Collected | None = None

    @property
    def last(self) -> Holdings:
        """The place the export ends in: the dataset, else the landing area."""
        return self.dataset if self.dataset is not None else self.landing

    @property
    def lost(self) -> int:
        """Journal records that did not get through."""
        return sum(self.not_exported.values())

    def problems(self) -> list[str]:
        """What is wrong with the export, one sentence each (none: it holds every record)."""
        out: list[str] = []
        where = "the dataset" if self.dataset is not None else "the landing area"
        if self.lost:
            kinds = ", ".join(f"{n:,} {k}" for k, n in sorted(self.not_exported.items()) if n)
            out.append(f"{self.lost:,} journal records are not in {where} ({kinds})")
        for name, held in (("landing area", self.landing), ("dataset", self.dataset)):
            if held is None:
                continue
            if held.duplicated:
                out.append(f"the {name} holds {held.duplicated:,} journal records twice")
            if held.altered:
                out.append(f"the {name} holds {held.altered:,} journal records altered")
            if held.foreign:
                out.append(f"the {name} holds {held.foreign:,} records the journal never wrote")
        if self.collect_gaps:
            out.append(f"the collector recorded {self.collect_gaps:,} offsets as not collected")
        if self.collect_restarts:
            out.append(f"the collector saw the middleware restart {self.collect_restarts} time(s)")
        if self.collected is not None:
            out += self.collected.problems()
        return out

    def as_dict(self) -> dict[str, Any]:
        def held(h: Holdings | None) -> dict[str, int] | None:
            if h is None:
                return None
            return {
                "copies": h.copies,
                "held": h.held,
                "duplicated": h.duplicated,
                "altered": h.altered,
                "foreign": h.foreign,
            }

        return {
            "journal": self.journal,
            "landing": held(self.landing),
            "dataset": held(self.dataset),
            "not_exported": dict(self.not_exported),
            "lost": self.lost,
            "collect_gaps": self.collect_gaps,
            "collect_restarts": self.collect_restarts,
            "collected": None if self.collected is None else dataclasses.asdict(self.collected),
        }


def _held(journal: dict[tuple[str, int], Record], place: Iterable[Record]) -> Holdings:
    copies = 0
    seen: Counter[tuple[str, int]] = Counter()
    altered: set[tuple[str, int]] = set()
    for r in place:
        copies += 1
        key = (r.boot_id, r.offset)
        seen[key] += 1
        mine = journal.get(key)
        if mine is not None and mine.hash != r.hash:
            altered.add(key)
    foreign = sum(1 for k in seen if k not in journal)
    return Holdings(
        copies=copies,
        held=sum(1 for k in seen if k in journal and k not in altered),
        duplicated=copies - len(seen),
        altered=len(altered),
        foreign=foreign,
    )


def compare(
    journal: Iterable[Record],
    landing: Iterable[Record],
    dataset: Iterable[Record] | None,
    *,
    collector_records: Iterable[dict[str, Any]] = (),
) -> ExportCheck:
    """What the landing area and the dataset hold of ``journal`` (in written order).

    ``collector_records``: the landing area's ``collect_gap``/``collect_restart``
    records. Linear in the records.
    """
    ordered = list(journal)
    by_key = {(r.boot_id, r.offset): r for r in ordered}
    landing_records = list(landing)
    dataset_records = None if dataset is None else list(dataset)
    last = landing_records if dataset_records is None else dataset_records
    present = {(r.boot_id, r.offset) for r in last}
    missing = [r for r in ordered if (r.boot_id, r.offset) not in present]
    notes = list(collector_records)
    return ExportCheck(
        journal=len(by_key),
        landing=_held(by_key, landing_records),
        dataset=None if dataset_records is None else _held(by_key, dataset_records),
        not_exported=dict(Counter(r.kind for r in missing)),
        collect_gaps=sum(
            int(n.get("count", 0)) for n in notes if n.get("kind") == CollectorKind.GAP
        ),
        collect_restarts=sum(1 for n in notes if n.get("kind") == CollectorKind.RESTART),
    )


# -- reading the places -----------------------------------------------------------------------


def _record(line: bytes) -> Record | None:
    """The record of a whole journal line, or None (torn, not JSON, not a record)."""
    if not line.endswith(b"\n"):
        return None
    try:
        rec = json.loads(line)
        return Record(str(rec["boot_id"]), int(rec["offset"]), str(rec["hash"]), str(rec["kind"]))
    except (ValueError, KeyError, TypeError):
        return None


def read_journal_records(directory: Path) -> list[Record]:
    """The records of the journal's segments in ``directory``, in written order
    (a torn or unreadable line is not a record: ``journal verify`` lists those)."""
    return [r for path in segment_files(directory) for line in lines(path) if (r := _record(line))]


def _data_files(landing: Path, pattern: str) -> Iterator[Path]:
    """``landing``'s files matching ``pattern``, without the collector's bookkeeping
    (any path component starting with ``_`` or ``.``)."""
    for path in sorted(landing.glob(pattern)):
        if path.is_file() and not layout.is_bookkeeping(path.relative_to(landing).parts):
            yield path


def read_landing(landing: Path) -> tuple[list[Record], list[dict[str, Any]]]:
    """The journal records a (local) landing area holds, and its collector records."""
    records = [
        r
        for path in _data_files(landing, layout.DATA_GLOB)
        for line in lines(path)
        if (r := _record(line))
    ]
    notes = [
        json.loads(line)
        for path in _data_files(landing, layout.COLLECTOR_GLOB)
        for line in lines(path)
        if line.strip()
    ]
    return records, notes


def read_dataset(dataset: Path) -> list[Record]:
    """The journal lines the Parquet dataset's ``records`` table holds (rows of a
    batch line's later events are not lines). Needs pyarrow (the analysis extra)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]
    import pyarrow.dataset as pads  # type: ignore[import-untyped]

    table = pads.dataset(dataset / "records", format="parquet", partitioning="hive")
    columns = ["boot_id", "offset", "hash"]
    if "batch_index" in table.schema.names:
        index = pc.field("batch_index")
        rows = table.to_table(columns=columns, filter=index.is_null() | (index == 0))
    else:
        rows = table.to_table(columns=columns)
    return [
        Record(b, int(o), h.hex() if h else "")
        for b, o, h in zip(
            rows.column("boot_id").to_pylist(),
            rows.column("offset").to_pylist(),
            rows.column("hash").to_pylist(),
            strict=True,
        )
    ]


def check_export(
    journal: Path, landing: Path, dataset: Path | None, *, collected: Collected | None = None
) -> ExportCheck:
    """:func:`compare` of the journal directory, the landing area and the dataset
    (None: not ingested), with the collector's own counts."""
    landed, notes = read_landing(landing)
    check = compare(
        read_journal_records(journal),
        landed,
        None if dataset is None else read_dataset(dataset),
        collector_records=notes,
    )
    return dataclasses.replace(check, collected=collected)
