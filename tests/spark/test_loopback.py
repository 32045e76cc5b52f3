"""A local Spark run of the fleet job listens on loopback unless told otherwise: by
default Spark takes the host's first non-loopback address (and says so), which a
developer's laptop on a café network should not expose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vehicle_middleware.telemetry_export.synth import write_fleet


def test_a_local_run_binds_to_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    write_fleet(str(tmp_path / "fleet"), vehicles=1, records=500, seed=3)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.telemetry_export",
            "--shuffle-partitions",
            "1",
            "ingest",
            "--input",
            str(tmp_path / "fleet"),
            "--output",
            str(tmp_path / "dataset"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout[result.stdout.index("{") :])
    assert "resolves to a loopback address" not in result.stderr, result.stderr[-3000:]
    assert "SPARK_LOCAL_IP" not in result.stderr, result.stderr[-3000:]
