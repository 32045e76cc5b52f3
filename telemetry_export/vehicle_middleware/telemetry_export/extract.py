"""Read journal segments and landing areas (local paths or any Hadoop-filesystem
URI), as a batch or as a stream, and datasets."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType
from vehicle_middleware.telemetry_export.schema import INPUT_FILES, RECORD

__all__ = ["read_dataset", "read_lines", "stream_lines"]


def read_lines(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """Every line of the files named :data:`~vehicle_middleware.telemetry_export.schema.INPUT_FILES`
    under ``inputs`` (files, or directories at any depth: journal directories
    copied from cars, or landing areas; ``.gz`` is read transparently), with
    the file it came from as ``source``."""
    return (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", INPUT_FILES)
        .text(list(inputs))
        .select("value", F.input_file_name().alias("source"))
    )


def stream_lines(
    spark: SparkSession, landing: str, *, max_files_per_trigger: int | None = None
) -> DataFrame:
    """The lines of the files of :func:`read_lines` under ``landing``, as a stream:
    Spark's file source, which takes each file once, in the micro-batch after
    it appeared (its checkpoint remembers which it took). A file must appear
    whole (the collector renames it into place)."""
    reader = (
        spark.readStream.format("text")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", INPUT_FILES)
    )
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    return reader.load(landing).select("value", F.input_file_name().alias("source"))


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
