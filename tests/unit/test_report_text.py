"""How report.md says a boot's journal losses: each figure named, and why a
crashed boot reports more than its offsets show missing."""

from __future__ import annotations

from vehicle_middleware.telemetry_export.report import _journal_lost


def test_a_crashed_boots_losses_name_each_figure_and_the_tail_no_offset_shows() -> None:
    crashed = {"missing_records": 12, "reported_dropped": 15, "unreported_lost": 0}
    assert (
        _journal_lost(crashed) == "12 missing, 15 reported (3 after the last record), 0 unreported"
    )
    silent = {"missing_records": 4, "reported_dropped": 1, "unreported_lost": 3}
    assert _journal_lost(silent) == "4 missing, 1 reported, **3** unreported"
    assert _journal_lost({"missing_records": 0, "reported_dropped": 0, "unreported_lost": 0}) == (
        "none"
    )


def test_the_read_pace_is_batches_per_second_over_the_span_of_deliveries() -> None:
    from vehicle_middleware.telemetry_export.report import _pace

    assert _pace(20, 20_000_000_000) == "1 batch/s"
    assert _pace(50, 20_000_000_000) == "2.5 batches/s"
    assert _pace(0, 20_000_000_000) == "-"
