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
* Spark's own log: errors only by default (``spark_log_level``). The JVM
  starts with a log4j2 configuration at that level
  (``spark.driver.extraJavaOptions``: what it says while starting, before
  ``setLogLevel`` could run) and the context is set to it; the commands'
  ``--spark-log-level warn`` brings Spark's warnings back.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession
from vehicle_middleware.telemetry_export import jvm

__all__ = [
    "SPARK_LOG_LEVELS",
    "DriverStartError",
    "build_session",
    "log4j2_properties",
    "stop_session",
]

SPARK_LOG_LEVELS: Final = ("error", "warn", "info", "debug")
"""What ``spark_log_level`` takes (log4j's level names)."""


_SHELL_LOGGERS: Final = (
    "org.apache.spark.repl.Main",
    "org.apache.spark.api.python.PythonGatewayServer",
    "org.apache.spark.deploy.SparkSubmit",
    "org.apache.spark.SparkContext",
)
"""The loggers Spark may read a shell's level from (a PySpark driver is a shell):
without a level of their own, Spark sets the console to WARN and says so."""


def log4j2_properties(level: str) -> str:
    """A log4j2 configuration: Spark's log on stderr, at ``level`` and above."""
    if level not in SPARK_LOG_LEVELS:
        raise ValueError(f"spark log level {level!r}: one of {', '.join(SPARK_LOG_LEVELS)}")
    return "\n".join(
        [
            f"rootLogger.level = {level}",
            "rootLogger.appenderRef.stderr.ref = console",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.target = SYSTEM_ERR",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex",
            *(
                line
                for i, name in enumerate(_SHELL_LOGGERS)
                for line in (f"logger.shell{i}.name = {name}", f"logger.shell{i}.level = {level}")
            ),
            "",
        ]
    )


def _log_config(level: str) -> Path:
    """:func:`log4j2_properties` as a file in the temporary directory."""
    path = (
        Path(tempfile.gettempdir())
        / "vehicle_middleware.telemetry_export"
        / (f"log4j2-{level}.properties")
    )
    text = log4j2_properties(level)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(path)
    return path


def build_session(
    master: str | None = None,
    *,
    app_name: str = "vehicle_middleware.telemetry_export",
    shuffle_partitions: int = 16,
    extra: dict[str, str] | None = None,
    fast_parse: bool = True,
    spark_log_level: str = "error",
    driver_log: Path | None = None,
) -> SparkSession:
    """A session for ``master`` (default: ``local[*]``, or what spark-submit set),
    with ingest's JVM parse (:mod:`vehicle_middleware.telemetry_export.jvm`) unless ``fast_parse``
    is false, or there is no JDK, or a session already runs without it; Spark's
    own log at ``spark_log_level`` (one of :data:`SPARK_LOG_LEVELS`).

    ``driver_log``: where the driver's JVM, if this call starts it, writes what it
    prints (appended); by default it writes to this process's output.

    Raises:
        ValueError: ``spark_log_level`` is not a level.
        DriverStartError: the driver's JVM, started with a ``driver_log``, exited
            before it answered; the error holds the end of that log.
    """
    log_config = _log_config(spark_log_level)
    conf = {"spark.app.name": app_name}
    if master:
        conf["spark.master"] = master
    elif not SparkSession.getActiveSession():
        conf["spark.master"] = "local[*]"
    conf |= {
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
    # The driver's JVM reads it when it starts (a JVM started here: local, or a
    # client of a cluster); a running one keeps its own, set below.
    java_options = conf.get("spark.driver.extraJavaOptions", "")
    conf["spark.driver.extraJavaOptions"] = (
        f"{java_options} -Dlog4j2.configurationFile=file:{log_config}".strip()
    )
    if driver_log is not None:
        _start_driver(conf, driver_log)
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(spark_log_level.upper())
    if jar is not None:
        jvm.register(session)
    return session


class DriverStartError(RuntimeError):
    """The driver's JVM exited as it started (:func:`build_session`'s ``driver_log``)."""


def _start_driver(settings: dict[str, str], log: Path) -> None:
    """Start the driver's JVM with ``settings``, as ``getOrCreate`` would,
    with its output in ``log``; nothing if a driver runs or spark-submit started
    this process (then the JVM is already there)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    if SparkContext._active_spark_context is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        try:
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                conf, {"stdout": out, "stderr": subprocess.STDOUT}
            )
        except PySparkRuntimeError as e:
            said = log.read_bytes()[-2000:].decode(errors="replace").strip()
            raise DriverStartError(
                f"Spark's driver JVM exited before it answered ({e}); "
                f"the end of {log}: {said or '(nothing)'}"
            ) from e
    SparkContext(conf=conf, gateway=gateway)


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
