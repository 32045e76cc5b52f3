"""The explicit schema of a journal record (see middleware.journal.records).

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

__all__ = ["HASH_FIELDS", "HASH_PREFIX_LEN", "RECORD", "REQUIRED"]

HASH_PREFIX_LEN: Final = len('{"hash":"",') + 64
"""A line is ``{"hash":"<64 hex>",`` then the canonical body the hash is over."""

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
