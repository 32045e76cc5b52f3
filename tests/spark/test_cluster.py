"""The same jobs, unchanged, on a real standalone Spark cluster (master and worker
on loopback, started from the installed pyspark): the batch ingest of journal
directories, the analysis, and the streaming ingest of a landing area."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from vehicle_middleware.telemetry_export.synth import landing_files, write_fleet

from tests.conftest import wait_until

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


def _env(log_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(log_dir),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
    }


def _wait_for(path: Path, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
    """The first match of ``pattern`` in another process's log, within ``timeout``."""

    def found() -> re.Match[str] | None:
        return pattern.search(path.read_text(errors="replace")) if path.exists() else None

    wait_until(lambda: found() is not None, timeout=timeout, what=f"{pattern.pattern!r} in {path}")
    match = found()
    assert match is not None
    return match


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("spark-logs")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master_log = logs / "master.log"
        with master_log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--webui-port",
                        "0",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_env(logs),
                )
            )
        url = _wait_for(master_log, MASTER_URL, 60).group(1)
        worker_log = logs / "worker.log"
        with worker_log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        "0",
                        "--work-dir",
                        str(logs / "work"),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_env(logs),
                )
            )
        _wait_for(master_log, re.compile(r"Registering worker"), 60)
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _run(master: str, *args: str, log_dir: Path) -> dict[str, object]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.telemetry_export",
            "--master",
            master,
            "--shuffle-partitions",
            "2",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(log_dir),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    start = result.stdout.index("{")
    return json.loads(result.stdout[start:])  # type: ignore[no-any-return]


def test_the_job_runs_unchanged_on_a_standalone_cluster(cluster: str, tmp_path: Path) -> None:
    facts = write_fleet(str(tmp_path / "fleet"), vehicles=2, records=5_000, seed=5)
    # `report`: ingest, then analyze, in one driver.
    summary = _run(
        cluster,
        "report",
        "--input",
        str(tmp_path / "fleet"),
        "--output",
        str(tmp_path / "out"),
        log_dir=tmp_path,
    )
    assert (summary["records"], summary["bad_lines"]) == (facts["records"], 0)
    assert (tmp_path / "out" / "dataset" / "records").is_dir()
    assert (tmp_path / "out" / "report" / "report.md").is_file()
    assert summary["vehicles"] == 2
    assert summary["restarts"] == facts["restarts"]
    assert summary["dropped"] == facts["dropped"]
    assert summary["unexplained_seqs"] == 0
    assert summary["broken_chains"] == 0


def _held(dataset: Path) -> set[tuple[str, int, bytes, int | None]]:
    """Every row of a dataset's records by boot, offset, hash and place in its batch."""
    import pyarrow.dataset as pads  # type: ignore[import-untyped]

    table = pads.dataset(dataset / "records", format="parquet", partitioning="hive").to_table(
        columns=["boot_id", "offset", "hash", "batch_index"]
    )
    return set(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def test_the_streaming_ingest_runs_unchanged_on_a_standalone_cluster(
    cluster: str, tmp_path: Path
) -> None:
    """A landing area in the collector's layout, ingested by ``--stream --once`` on
    the cluster: the records of the batch ingest of the same journals, once each."""
    facts = write_fleet(str(tmp_path / "fleet"), vehicles=2, records=1_500, seed=6)
    for name, data in landing_files(str(tmp_path / "fleet"), lines_per_file=400).items():
        (tmp_path / "landing" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "landing" / name).write_bytes(data)
    streamed = _run(
        cluster,
        "ingest",
        "--stream",
        "--once",
        "--input",
        str(tmp_path / "landing"),
        "--output",
        str(tmp_path / "streamed"),
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--max-files-per-trigger",
        "5",
        log_dir=tmp_path,
    )
    assert streamed["records"] == facts["records"]
    assert streamed["batches"] > 1  # several micro-batches, in one run
    assert streamed["duplicates"] == 0
    # Each journal line the collector landed, once.
    landed = {
        (r["boot_id"], r["offset"], bytes.fromhex(r["hash"]), None)
        for p in (tmp_path / "landing").rglob("*.jsonl")
        for r in map(json.loads, p.read_text().splitlines())
    }
    assert _held(tmp_path / "streamed") == landed
