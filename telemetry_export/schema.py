"""The explicit schemas of what ingest reads: a journal record (see
middleware.journal.records) and a collector record (the landing contract's
``collect_gap`` and ``collect_restart``, written by telemetry_export.collect).

Fields added by later journal versions are nullable: an older journal reads
with them null."""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from middleware.journal.chain import HASH_PREFIX_LEN

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

_FIELDS: Final = [
    ("kind", StringType()),
    ("vehicle_id", StringType()),
    ("boot_id", StringType()),
    ("offset", LongType()),
    ("time_ns", LongType()),
    ("prev_hash", StringType()),
    ("hash", StringType()),
    ("app", StringType()),
    ("key", StringType()),
    ("key_id", LongType()),
    ("queue", IntegerType()),
    ("seq", LongType()),
    ("reason", StringType()),
    ("version", LongType()),
    ("changed", BooleanType()),
    ("size", LongType()),
    ("writer", StringType()),
    ("write_time_ns", LongType()),
    ("sent_ns", LongType()),
    ("count", LongType()),
    ("cause", StringType()),
    ("stream", StringType()),
    ("trigger", StringType()),
    ("status", StringType()),
    ("details", StringType()),  # nested JSON kept as its text
    # journal_trimmed: what retention removed of one boot, and where that boot's
    # chain now starts on disk (kept_offset null: none of its records remain).
    ("trimmed_boot_id", StringType()),
    ("files", LongType()),
    ("bytes", LongType()),
    ("kept_offset", LongType()),
    ("kept_prev_hash", StringType()),
    # journal_dropped: the boot the count belongs to, when not the writer's own
    # (a later boot reporting what a crashed or disk-full one could not).
    ("lost_boot_id", StringType()),
    # publish_batch and delivered_batch: one entry per event (middleware.journal.records
    # BATCH_FIELDS names them); ingest expands them into the per-event kinds' columns.
    ("key_ids", ArrayType(LongType())),
    ("keys", ArrayType(StringType())),
    ("versions", ArrayType(LongType())),
    ("changes", ArrayType(BooleanType())),
    ("sizes", ArrayType(LongType())),
    ("seqs", ArrayType(LongType())),
    ("queues", ArrayType(IntegerType())),
    ("write_times_ns", ArrayType(LongType())),
]
RECORD: Final = StructType([StructField(n, t, nullable=True) for n, t in _FIELDS])
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
"""The landing contract's collector records (see :mod:`telemetry_export.collect`)."""
COLLECTOR_REQUIRED: Final = {
    "collect_gap": ("vehicle_id", "boot_id", "from_offset", "to_offset", "count"),
    "collect_restart": ("vehicle_id", "old_boot_id", "new_boot_id"),
}
