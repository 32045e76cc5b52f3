"""The explicit schemas of what ingest reads: a journal record (see
vehicle_middleware.contract.journal.records) and a collector record (the landing contract's
``collect_gap`` and ``collect_restart``: vehicle_middleware.contract.journal.landing).

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
from vehicle_middleware.contract.journal.chain import HASH_PREFIX_LEN
from vehicle_middleware.contract.journal.landing import (
    COLLECTOR_FIELDS,
    COLLECTOR_KINDS,
    COLLECTOR_REQUIRED,
)
from vehicle_middleware.contract.journal.records import ENVELOPE, HASH_FIELDS
from vehicle_middleware.contract.journal.records import FIELDS as JOURNAL_FIELDS

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
"""A journal record: every field of :data:`vehicle_middleware.contract.journal.records.FIELDS`, the
journal's one definition of them (batch records' arrays are expanded by
:func:`vehicle_middleware.telemetry_export.transforms.expand_batches`)."""
REQUIRED: Final = ENVELOPE
"""The fields without which a line is no journal record (every record has them)."""

COLLECTOR: Final = StructType(
    [StructField(n, _spark_type(t), nullable=True) for n, t in COLLECTOR_FIELDS.items()]
)
"""The landing contract's collector records (:data:`COLLECTOR_KINDS`; in no hash
chain: no offset, no hash): every field of
:data:`vehicle_middleware.contract.journal.landing.COLLECTOR_FIELDS`."""
