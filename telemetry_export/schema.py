"""The explicit schema of a journal record (see middleware.journal.records)."""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

__all__ = ["HASH_PREFIX_LEN", "RECORD", "REQUIRED"]

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
]
RECORD: Final = StructType([StructField(n, t, nullable=True) for n, t in _FIELDS])
REQUIRED: Final = ("kind", "vehicle_id", "boot_id", "offset", "time_ns", "hash", "prev_hash")
