"""The core example (examples/core/ess_core.py, shown in docs/design.md, "Using the
core") runs and does what its comments say."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from vehicle_middleware.ess import DataUpdated

PROGRAM = "examples/core/ess_core.py"


def test_the_core_example_in_the_design_page_runs_and_delivers_the_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scope = runpy.run_path(str(Path(__file__).parents[2] / PROGRAM), run_name="__main__")
    [shown] = scope["events"]
    assert isinstance(shown, DataUpdated)
    assert (shown.key, shown.seq, shown.data) == (1, 1, b"2")
    assert capsys.readouterr().out == f"{[shown]}\n"
    store, ess = scope["store"], scope["ess"]
    assert ess.drain("dashboard", 100) == []  # the example's own drain already took the event
    store.set(1, b"\x33")
    [event] = ess.drain("dashboard", 100)
    assert isinstance(event, DataUpdated)
    assert (event.key, event.seq, event.data) == (1, 2, b"3")
