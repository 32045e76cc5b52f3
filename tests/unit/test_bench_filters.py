"""``bench.filters``: its core scenarios run what they say (the timing is the bench's)."""

from __future__ import annotations

from bench import filters


def test_each_core_scenario_runs_and_is_timed() -> None:
    best = filters.core(repeats=1, rounds=1)
    assert set(best) == {"unfiltered", "interval held", "threshold skipped", "drop rule"}
    assert all(ns > 0 for ns in best.values())
