"""One local SparkSession for the whole Spark test suite: fast settings."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from vehicle_middleware.telemetry_export.session import build_session

    session = build_session(
        "local[1]",
        app_name="vehicle_middleware.telemetry_export-tests",
        shuffle_partitions=1,
        extra={"spark.sql.adaptive.enabled": "false", "spark.driver.memory": "1g"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
