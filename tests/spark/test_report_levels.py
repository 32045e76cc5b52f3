"""A journal kept at the default level (``drops``) records no delivery: the report
says so and prints no figure it cannot know (it printed delivered 0, a drop rate of
100 % and "every seq gap is explained"); what it can know, the drops by app, queue
and key, is right."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from vehicle_middleware.telemetry_export import job
from vehicle_middleware.telemetry_export.synth import write_fleet


def test_a_drops_level_journal_is_reported_without_figures_it_cannot_know(
    spark: SparkSession, tmp_path: Path
) -> None:
    facts = write_fleet(str(tmp_path / "fleet"), vehicles=2, records=4_000, seed=4, level="drops")
    assert facts["delivered"] == 0  # nothing written that a delivery would be read from
    assert facts["dropped"] > 0
    job.ingest(spark, [str(tmp_path / "fleet")], str(tmp_path / "dataset"))
    report = tmp_path / "report"
    summary = job.analyze(spark, str(tmp_path / "dataset"), str(report))
    assert summary["journal_levels"] == ["drops"]
    assert summary["deliveries_recorded"] is False
    for unknown in ("delivered", "seq_gaps", "missing_seqs", "unexplained_seqs"):
        assert summary[unknown] is None, unknown
    assert summary["dropped"] == facts["dropped"]
    assert summary["apps"]["slow"]["dropped"] == facts["dropped"]
    assert summary["apps"]["slow"]["dropped_per_queue"] == {"0": facts["dropped"]}
    text = (report / "report.md").read_text()
    assert "does not record deliveries" in text
    assert "every seq gap is explained" not in text
    assert "100.0%" not in text
    assert "| delivered | not recorded |" in text
