"""One local SparkSession for the whole Spark test suite: fast settings."""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Final

import pytest
from pyspark.sql import SparkSession

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every JVM the tests start (the session's driver, the command-line runs, a standalone
# cluster's master and worker) reads a few thousand records and exits: the first
# compiler tier and the serial collector start it in about half the CPU time that
# the optimising compiler's threads would take on a small machine, and never pay back.
SHORT_RUN_JVM: Final = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_RUN_JVM)  # a driver spark-submit starts
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", SHORT_RUN_JVM)  # a cluster's master, worker


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The session; its driver's output in a file, so that a JVM that exits as it
    starts says why. Such a start is tried once more (said as a warning, with the
    reason): a machine short of memory or threads for a moment fails one start,
    not the Spark tests of a whole worker."""
    from vehicle_middleware.telemetry_export.session import DriverStartError, build_session

    log = tmp_path_factory.mktemp("spark-driver") / "driver.log"
    start = functools.partial(
        build_session,
        "local[1]",
        app_name="vehicle_middleware.telemetry_export-tests",
        shuffle_partitions=1,
        extra={"spark.sql.adaptive.enabled": "false", "spark.driver.memory": "1g"},
        driver_log=log,
    )
    try:
        session = start()
    except DriverStartError as e:
        warnings.warn(f"{e}; starting it once more", stacklevel=1)
        session = start()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
