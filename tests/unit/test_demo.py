"""The in-process demonstration run by `make demo` tells the truth about drops."""

from __future__ import annotations

import pytest

from middleware import demo


def test_demo_slow_app_loses_events_fast_app_none_and_every_gap_is_explained(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert demo.main(["--ticks", "500"]) == 0
    out = capsys.readouterr().out
    assert "demo OK" in out
    lines: list[str] = []
    figures = demo.run(500, 20, lines)
    slow, dash = figures["slow"], figures["dashboard"]
    assert dash.dropped == 0
    assert dash.gaps == 0
    assert dash.received > 0
    assert slow.dropped > 0
    assert slow.explained
    assert slow.gaps + slow.trailing == slow.dropped
