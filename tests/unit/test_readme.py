"""The README's example runs and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

from vmw.ess import DataUpdated


def test_readme_core_example_runs_and_delivers_the_event() -> None:
    text = (Path(__file__).parents[2] / "README.md").read_text()
    [code] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "EventSubSystem" in b]
    scope: dict[str, object] = {}
    exec(compile(code + "\nresult = ess.drain('dashboard', 100)\n", "README.md", "exec"), scope)
    assert scope["result"] == []  # the example's own drain already took the event
    store, ess = scope["store"], scope["ess"]
    store.set(1, b"\x33")  # type: ignore[attr-defined]
    [event] = ess.drain("dashboard", 100)  # type: ignore[attr-defined]
    assert isinstance(event, DataUpdated)
    assert (event.key, event.seq, event.data) == (1, 2, b"3")
