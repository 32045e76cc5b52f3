"""The core example (docs/design.md, "Using the core") runs and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

from vehicle_middleware.ess import DataUpdated


def test_the_core_example_in_the_design_page_runs_and_delivers_the_event() -> None:
    text = (Path(__file__).parents[2] / "docs" / "design.md").read_text()
    [code] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "EventSubSystem" in b]
    scope: dict[str, object] = {}
    exec(
        compile(code + "\nresult = ess.drain('dashboard', 100)\n", "docs/design.md", "exec"), scope
    )
    assert scope["result"] == []  # the example's own drain already took the event
    store, ess = scope["store"], scope["ess"]
    store.set(1, b"\x33")  # type: ignore[attr-defined]
    [event] = ess.drain("dashboard", 100)  # type: ignore[attr-defined]
    assert isinstance(event, DataUpdated)
    assert (event.key, event.seq, event.data) == (1, 2, b"3")
