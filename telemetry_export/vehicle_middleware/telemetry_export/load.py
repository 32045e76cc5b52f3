"""The analysis' load step: its tables written as Parquet (the report and its plots
are :mod:`vehicle_middleware.telemetry_export.report`'s and
:mod:`vehicle_middleware.telemetry_export.plots`')."""

from __future__ import annotations

from pyspark.sql import DataFrame

__all__ = ["write_table"]


def write_table(df: DataFrame, path: str, *, partition_by: list[str] | None = None) -> None:
    """Write ``df`` as Parquet at ``path``, replacing what is there; a directory per
    value of the ``partition_by`` columns, if given."""
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(path)
