"""Read journal segments (local paths or any Hadoop-filesystem URI) and datasets."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from telemetry_export.schema import RECORD

__all__ = ["has_rows", "read_dataset", "read_lines"]


def read_lines(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """Every line of the journal segments under ``inputs`` (files or directories;
    ``.gz`` is read transparently), with the file it came from as ``source``."""
    return (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "journal-*.jsonl*")
        .text(list(inputs))
        .select("value", F.input_file_name().alias("source"))
    )


def read_dataset(
    spark: SparkSession, path: str, columns: Sequence[str], *, optional: Sequence[str] = ()
) -> DataFrame:
    """``columns`` of the Parquet dataset written by ``ingest``; those of
    ``optional`` that it lacks (written by an older ``ingest``) as nulls of
    the type the record schema gives them (strings where it has none).

    Raises:
        ValueError: the dataset lacks some others (e.g. it was written by an
            older ``ingest``, before records carried ``pos`` and ``link_ok``).
    """
    df = spark.read.parquet(path)
    missing = [c for c in columns if c not in df.columns and c not in optional]
    if missing:
        raise ValueError(
            f"{path} has no column {', '.join(missing)}: write it again with this version's ingest"
        )
    types = {f.name: f.dataType for f in RECORD.fields}
    return df.select(
        *(
            F.col(c) if c in df.columns else F.lit(None).cast(types.get(c, StringType())).alias(c)
            for c in columns
        )
    )


def has_rows(spark: SparkSession, path: str) -> bool:
    """Whether the directory ``path`` (any Hadoop filesystem) holds a data file
    (``part-*``) that is not empty: reading one that holds none makes Spark
    warn that all paths were ignored (an empty DataFrame writes an empty part)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    found = fs.globStatus(jvm.org.apache.hadoop.fs.Path(f"{path}/part-*"))
    return found is not None and any(f.getLen() > 0 for f in found)
