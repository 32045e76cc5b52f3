"""The explicit schemas of what ingest reads: a journal record (see
vmw.contract.journal.records) and a collector record (the landing contract's
``collect_gap`` and ``collect_restart``, written by vmw.fleet.collect).

Fields added by later journal versions are nullable: an older journal reads
with them null."""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)
from vmw.contract.journal.chain import HASH_PREFIX_LEN
from vmw.contract.journal.records import FIELDS as JOURNAL_FIELDS

__all__ = [
    "COLLECTOR",
    "COLLECTOR_KINDS",
    "COLLECTOR_REQUIRED",
    "HASH_FIELDS",
    "HASH_PREFIX_LEN",
    "INPUT_FILES",
    "RECORD",
    "REQUIRED",
]

INPUT_FILES: Final = "*.{jsonl,jsonl.gz}"
"""The files ingest reads under its inputs (at any depth; names starting with
``_`` or ``.`` are skipped, as Spark's file sources skip them): the journal's
segments (``journal-*.jsonl``, ``.jsonl.gz``) and a landing area's files
(``part-*.jsonl``, ``collector-*.jsonl``)."""

_TYPES: Final[dict[str, DataType]] = {
    "string": StringType(),
    "json": StringType(),  # a nested JSON value, kept as its text
    "long": LongType(),
    "int": IntegerType(),
    "boolean": BooleanType(),
}


def _spark_type(name: str) -> DataType:
    if name.startswith("array<") and name.endswith(">"):
        return ArrayType(_TYPES[name[len("array<") : -1]])
    return _TYPES[name]


RECORD: Final = StructType(
    [StructField(n, _spark_type(t), nullable=True) for n, t in JOURNAL_FIELDS.items()]
)
"""A journal record: every field of :data:`vmw.contract.journal.records.FIELDS`, the
journal's one definition of them (batch records' arrays are expanded by
:func:`vmw.fleet.transforms.expand_batches`)."""
HASH_FIELDS: Final = ("hash", "prev_hash", "kept_prev_hash")
"""Hex SHA-256 fields, stored as 32 bytes."""
REQUIRED: Final = ("kind", "vehicle_id", "boot_id", "offset", "time_ns", "hash", "prev_hash")

COLLECTOR_KINDS: Final = ("collect_gap", "collect_restart")
"""Records a collector adds to a landing area; in no hash chain (no offset, no hash)."""
COLLECTOR: Final = StructType(
    [
        StructField(n, t, nullable=True)
        for n, t in [
            ("kind", StringType()),
            ("vehicle_id", StringType()),
            ("time_ns", LongType()),
            ("collector", StringType()),
            # collect_gap: offsets from_offset..to_offset (inclusive, wrapping) of
            # boot_id were written but not collected; count of them, and why.
            ("boot_id", StringType()),
            ("from_offset", LongType()),
            ("to_offset", LongType()),
            ("count", LongType()),
            ("reason", StringType()),
            # collect_restart: the collector followed the middleware into a new boot.
            ("old_boot_id", StringType()),
            ("new_boot_id", StringType()),
        ]
    ]
)
"""The landing contract's collector records (see :mod:`vmw.fleet.collect`)."""
COLLECTOR_REQUIRED: Final = {
    "collect_gap": ("vehicle_id", "boot_id", "from_offset", "to_offset", "count"),
    "collect_restart": ("vehicle_id", "old_boot_id", "new_boot_id"),
}
