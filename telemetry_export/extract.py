"""Read journal segments (local paths or any Hadoop-filesystem URI) and datasets."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

__all__ = ["read_dataset", "read_lines"]


def read_lines(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """Every line of the journal segments under ``inputs`` (files or directories;
    ``.gz`` is read transparently), with the file it came from as ``source``."""
    return (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "journal-*.jsonl*")
        .text(list(inputs))
        .select("value", F.input_file_name().alias("source"))
    )


def read_dataset(spark: SparkSession, path: str, columns: Sequence[str]) -> DataFrame:
    """``columns`` of the Parquet dataset written by ``ingest``.

    Raises:
        ValueError: the dataset lacks some of them (e.g. it was written by an
            older ``ingest``, before records carried ``pos`` and ``link_ok``).
    """
    df = spark.read.parquet(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"{path} has no column {', '.join(missing)}: write it again with this version's ingest"
        )
    return df.select(*columns)
