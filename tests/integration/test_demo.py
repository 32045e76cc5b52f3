"""`make demo`, shortened to 5 s: the real processes, the real export, the real Spark analysis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from vehicle_middleware.contract.journal.segments import lines, segment_files


def test_the_demo_slow_app_loses_events_the_logger_none_and_the_journal_explains_every_gap(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo-out"
    demo = subprocess.Popen(
        [sys.executable, "-m", "vehicle_middleware.demo", "--duration", "5", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    try:
        stdout, stderr = demo.communicate(timeout=400)
    finally:
        if demo.poll() is None:  # SIGTERM: the demo then stops what it started
            demo.terminate()
            try:
                demo.communicate(timeout=60)
            finally:
                if demo.poll() is None:
                    demo.kill()
                    demo.wait()
    assert demo.returncode == 0, stdout + stderr
    # It says which implementation the middleware ran, and which Python ran it.
    assert f"codecs fast, run by {sys.executable}" in stdout, stdout
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
    # Its losses by cause: exactly the journal's evicted and lost records of the
    # app, and beside them what explains them: its queues and how fast it read.
    on_disk = Counter(
        r["kind"]
        for seg in segment_files(out / "journal")
        for r in map(json.loads, lines(seg))
        if r.get("app") == "slow" and r["kind"] in ("evicted", "lost")
    )
    assert (slow["evicted"], slow["lost"]) == (on_disk["evicted"], on_disk["lost"])
    assert slow["evicted"] + slow["lost"] == sum(slow["dropped"].values())
    assert slow["queue_min_max_events"]["0"] == [10, 20]  # the slow app's --queue-length
    assert slow["batches_read_per_s"] > 0
    assert f"slow lost {sum(slow['dropped'].values()):,} events ({slow['evicted']:,} evicted" in (
        stdout
    )
    # The fast app lost nothing and read every event of every key.
    assert logger["missed"] == logger["journal_gaps"] == 0
    assert sum(logger["dropped"].values()) == 0
    assert logger["received"] == logger["delivered"] > 0
    assert verdict["published"] > 1000
    analysis = verdict["analysis"]
    assert analysis["broken_chains"] == analysis["missing_journal_records"] == 0
    assert analysis["unexplained_seqs"] == 0
    # The injected fault: the cabin zone sensors' writes stopped (for 2 s of the
    # 5), and no other signal's did.
    stale = analysis["stale_keys_longest_ns"]
    assert {k.rsplit(".", 3)[0] for k in stale} == {"Vehicle.Cabin.HVAC.Zone"}
    assert len(stale) == 8  # 4 zones x (temperature, humidity)
    assert all(ns >= 1.9e9 for ns in stale.values())  # the stall, not jitter
    # The apps were told so live (KeyStale, then KeyFresh as the stall ended),
    # the slow one too although its queues dropped data; and told the provider
    # was gone when the demo stopped it.
    for live in verdict["live"].values():
        assert set(live["went_stale"]) == set(stale)
        assert live["fresh_events"] >= 8
        assert live["providers_gone"] == {"vehicle-sim": verdict["keys"]}
    assert "live        logger: told 8 key(s) went stale (Vehicle.Cabin.HVAC.Zone.*" in stdout
    # Spark's own log says only errors (none): no WARN lines around the progress.
    spark_log = (out / "logs" / "spark.log").read_text()
    assert " WARN " not in spark_log, spark_log
    # What the newcomer is told, and where the report is.
    assert "demo OK" in stdout
    assert (out / "report" / "report.md").exists()
    assert (out / "report" / "drops.png").exists()
    # Everything it started has stopped: each status file says so.
    for name in ("vehicle-sim", "logger", "slow"):
        assert json.loads((out / "apps" / f"{name}.json").read_text())["state"] == "stopped"
    # The logger's file is a recording of what it read.
    recorded = (out / "apps" / "logger.jsonl").read_text().splitlines()
    assert len(recorded) == logger["received"]
    # The export: the collector followed the middleware into the landing area,
    # the streaming ingest took that into the dataset, the analysis read it; the
    # dataset holds every record the journal on disk holds, once and unaltered,
    # the stop record too: the middleware hands it to its followers before it exits.
    export = verdict["export"]
    on_disk = sum(1 for seg in segment_files(out / "journal") for _ in lines(seg))
    assert export["journal"] == on_disk > 1000
    dataset, landing = export["dataset"], export["landing"]
    assert export["not_exported"] == {}
    assert export["lost"] == 0
    exported = on_disk
    assert dataset["held"] == dataset["copies"] == exported
    assert dataset["duplicated"] == dataset["altered"] == dataset["foreign"] == 0
    assert analysis["records"] == exported  # Spark counts the same records
    landed = sorted((out / "landing" / "vehicle=demo-car").glob("boot=*/part-*.jsonl"))
    assert landed
    assert sum(len(p.read_bytes().splitlines()) for p in landed) == landing["copies"]
    assert landing["held"] == landing["copies"] == exported
    assert landing["duplicated"] == landing["altered"] == landing["foreign"] == 0
    assert (out / "landing" / "_positions" / "vehicle=demo-car.json").exists()
    assert (out / "dataset" / "_checkpoint").is_dir()  # the streaming query's
    collected = export["collected"]
    assert collected["landed"] == landing["copies"]
    assert collected["files"] == len(landed)
    assert export["collect_gaps"] == export["collect_restarts"] == 0
    held = f"{exported:,} of {on_disk:,} journal records in the dataset"
    assert f"export      {held}, none duplicated, none altered" in stdout
    assert "the dataset holds every journal record" in stdout
    assert f"{exported:,} journal lines" in stdout  # what the streaming ingest said
