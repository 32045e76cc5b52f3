"""`make demo`, shortened to 5 s: the real processes, the real Spark analysis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_slow_app_loses_events_the_logger_none_and_the_journal_explains_every_gap(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo-out"
    run = subprocess.run(
        [sys.executable, "-m", "middleware.demo", "--duration", "5", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    verdict = json.loads((out / "demo-summary.json").read_text())
    assert verdict["ok"], verdict["problems"]
    slow, logger = verdict["apps"]["slow"], verdict["apps"]["logger"]
    # The slow app lost events, saw some of them as seq gaps, and the journal
    # holds exactly those gaps, each explained by a drop record.
    assert sum(slow["dropped"].values()) > 0
    assert slow["missed"] > 0
    assert slow["missed"] == slow["journal_gaps"]
    assert slow["received"] == slow["delivered"]
    assert slow["unexplained"] == 0
    # The fast app lost nothing and read every event of every key.
    assert logger["missed"] == logger["journal_gaps"] == 0
    assert sum(logger["dropped"].values()) == 0
    assert logger["received"] == logger["delivered"] > 0
    assert verdict["published"] > 1000
    analysis = verdict["analysis"]
    assert analysis["broken_chains"] == analysis["missing_journal_records"] == 0
    assert analysis["unexplained_seqs"] == 0
    # The injected fault: the cabin zone sensors went quiet, and only they.
    assert analysis["stale_keys"]
    assert all(k.startswith("Vehicle.Cabin.HVAC.Zone.") for k in analysis["stale_keys"])
    # What the newcomer is told, and where the report is.
    assert "demo OK" in run.stdout
    assert (out / "report" / "report.md").exists()
    assert (out / "report" / "drops.png").exists()
    # Everything it started has stopped: each status file says so.
    for name in ("vehicle-sim", "logger", "slow"):
        assert json.loads((out / "apps" / f"{name}.json").read_text())["state"] == "stopped"
    # The logger's file is a recording of what it read.
    lines = (out / "apps" / "logger.jsonl").read_text().splitlines()
    assert len(lines) == logger["received"]
