"""The SparkSession, configured for this job.

Settings that matter here (their figures: BENCHMARKS.md, "Telemetry analysis
(PySpark)"):

* ``spark.sql.shuffle.partitions``: Spark's default 200 is far too many tasks for
  a local analysis, where 8-64 all do; 16 here.
* ``spark.sql.adaptive.enabled``: on, so partition counts adapt on a cluster.
* ``spark.driver.memory``: 2-4g is enough for 30M rows locally (set it with
  ``--driver-memory`` or ``spark-submit``; it cannot change after start).
* ``spark.sql.session.timeZone`` = UTC: dates partition the same everywhere.
* ``spark.sql.sources.parallelPartitionDiscovery.threshold`` = 1024: a
  dataset of a few hundred vehicle/date directories is listed by the driver
  instead of by a Spark job, which costs more than the listing; a fleet's
  thousands still get the parallel listing.
* ``spark.sql.codegen.cache.maxEntries`` = 1000: ``analyze`` runs a few
  hundred generated classes (whole-stage code, projections, orderings) across
  its concurrent queries; the default cache of 100 evicts them before their
  tasks or the next run use them, and they are compiled again. It is a static
  setting: it applies to a session built here, not one that already exists.
* ``spark.sql.maxConcurrentOutputFileWriters`` = 64: ``ingest`` writes each
  record where it was read, partitioned by vehicle and date; a task keeps a
  file open per partition it meets (up to 64, then it sorts the rest) instead
  of sorting all its rows by partition first.
* ``spark.jars``: the jar of :mod:`vehicle_middleware.telemetry_export.jvm` (ingest's parse of a
  journal line), compiled on first use into the temporary directory when a
  JDK is there; the session registers its function.
* ``spark.ui.enabled`` off and ``SPARK_LOCAL_IP=127.0.0.1`` in tests and the demo.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from vehicle_middleware.telemetry_export import jvm

__all__ = ["build_session", "stop_session"]


def build_session(
    master: str | None = None,
    *,
    app_name: str = "vehicle_middleware.telemetry_export",
    shuffle_partitions: int = 16,
    extra: dict[str, str] | None = None,
    fast_parse: bool = True,
) -> SparkSession:
    """A session for ``master`` (default: ``local[*]``, or what spark-submit set),
    with ingest's JVM parse (:mod:`vehicle_middleware.telemetry_export.jvm`) unless ``fast_parse``
    is false, or there is no JDK, or a session already runs without it."""
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not SparkSession.getActiveSession():
        builder = builder.master("local[*]")
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1024",
        "spark.sql.codegen.cache.maxEntries": "1000",
        "spark.sql.maxConcurrentOutputFileWriters": "64",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **(extra or {}),
    }
    jar = (
        jvm.build_jar(Path(tempfile.gettempdir()) / "vehicle_middleware.telemetry_export")
        if fast_parse
        else None
    )
    if jar is not None:
        conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars"), str(jar)) if j)
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    if jar is not None:
        jvm.register(session)
    return session


def stop_session(spark: SparkSession, timeout: float = 30.0) -> None:
    """Stop ``spark`` and, if this process launched its JVM, wait for the JVM to exit.

    ``SparkSession.stop`` returns while the JVM is still shutting down (up to
    seconds): a command that returned would leave a java process behind.
    PySpark's gateway JVM exits when its stdin closes; this closes it and
    waits, so nothing this process started outlives it. Under spark-submit
    (the JVM started this process) there is nothing to wait for.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
