"""The demo's Spark step (no Spark started): it refuses command lines it would
not run as written, and says what it does while it works (its progress lines,
shown by the demo as they come)."""

from __future__ import annotations

import io
import os
import re
import sys
import threading
from pathlib import Path

import pytest
from vehicle_middleware.demo.processes import Supervisor, last_json
from vehicle_middleware.demo.spark import Progress, landing_lines, main

from tests.conftest import wait_until

INGEST = ["ingest", "--input", "landing", "--output", "dataset", "--stream", "--once"]
ANALYZE = ["analyze", "--input", "dataset", "--output", "report"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*INGEST, *ANALYZE], "usage: python -m vehicle_middleware.demo.spark"),
        ([*INGEST[:-1], "--", *ANALYZE], "the first command must be: ingest --stream --once"),
        ([*INGEST[:-2], "--", *ANALYZE], "the first command must be: ingest --stream --once"),
        ([*ANALYZE, "--", *ANALYZE], "the first command must be: ingest --stream --once"),
        ([*INGEST, "--", *INGEST], "the second command must be: analyze"),
        (
            ["ingest", "--input", "a", "b", "--output", "d", "--stream", "--once", "--", *ANALYZE],
            "--stream reads one landing area, got 2 inputs",
        ),
    ],
)
def test_a_command_line_it_would_not_run_as_written_is_refused(argv: list[str], said: str) -> None:
    with pytest.raises(SystemExit, match=said):
        main(argv)


def _lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_a_stage_says_when_it_starts_beats_while_it_runs_and_says_when_it_ends() -> None:
    out = io.StringIO()
    progress = Progress(out, every=0.01)
    progress.detail = lambda: " (2/4 tasks)"
    threads = set(threading.enumerate())
    with progress.stage("ingest", " of 10 journal lines"):
        # Heartbeats come while the stage runs, without it doing anything.
        wait_until(lambda: len(_lines(out)) >= 3, timeout=10, what="two heartbeats")
    lines = _lines(out)
    assert lines[0] == "spark: ingest of 10 journal lines..."
    assert all(
        re.fullmatch(r"spark: ingest: still working, \d+ s \(2/4 tasks\)", x) for x in lines[1:-1]
    )
    assert re.fullmatch(r"spark: ingest: done in \d+\.\d s", lines[-1])
    assert set(threading.enumerate()) == threads  # the heartbeat ended with the stage


def test_a_failing_stage_says_so_and_a_failing_detail_does_not_stop_the_heartbeat() -> None:
    out = io.StringIO()
    progress = Progress(out, every=0.01)

    def broken() -> str:
        raise RuntimeError("the JVM went away")

    progress.detail = broken

    def analysis() -> None:
        with progress.stage("analysis"):
            wait_until(lambda: len(_lines(out)) >= 3, timeout=10, what="two heartbeats")
            raise ValueError("bad landing")

    with pytest.raises(ValueError, match="bad landing"):
        analysis()
    lines = _lines(out)
    assert lines[0] == "spark: analysis..."
    assert all(re.fullmatch(r"spark: analysis: still working, \d+ s", x) for x in lines[1:-1])
    assert re.fullmatch(r"spark: analysis: failed after \d+\.\d s", lines[-1])


def test_the_landing_area_count_leaves_out_the_collectors_bookkeeping(tmp_path: Path) -> None:
    boot = tmp_path / "vehicle=car" / "boot=b1"
    boot.mkdir(parents=True)
    (boot / "part-1.jsonl").write_bytes(b'{"a":1}\n{"a":2}\n')
    (boot / "part-2.jsonl").write_bytes(b'{"a":3}\n')
    (boot / ".part-3.jsonl.tmp").write_bytes(b"x\n")
    (tmp_path / "_positions").mkdir()
    (tmp_path / "_positions" / "vehicle=car.jsonl").write_bytes(b"x\ny\n")
    assert landing_lines(tmp_path) == (3, 2)


def test_the_supervisor_shows_a_childs_lines_while_it_runs(tmp_path: Path) -> None:
    # The child prints a line, then waits (at most 60 s) for what seeing it
    # does: a file. It ends well only if the line was shown while it ran.
    seen = tmp_path / "seen"
    child = (
        "import pathlib, sys, time\n"
        "print('spark: working...', flush=True)\n"
        "deadline = time.monotonic() + 60\n"
        f"while not pathlib.Path({str(seen)!r}).exists():\n"
        "    if time.monotonic() > deadline: sys.exit(3)\n"
        "    time.sleep(0.01)\n"  # the child's polling pace (it has a deadline above)
        "print('{\"done\": true}')\n"
    )
    (tmp_path / "logs").mkdir()
    shown: list[str] = []

    def show(line: str) -> None:
        shown.append(line)
        seen.touch()

    sup = Supervisor(tmp_path / "logs", os.environ)
    stdout = sup.run("child", [sys.executable, "-c", child], timeout=120, on_line=show)
    assert shown == ["spark: working...", '{"done": true}']
    assert last_json(stdout) == {"done": True}
    assert (tmp_path / "logs" / "child.out").read_text() == stdout
    assert sup.children == {}


def test_sparks_own_log_is_configured_at_the_level_asked_errors_by_default() -> None:
    import inspect

    from vehicle_middleware.telemetry_export.session import build_session, log4j2_properties

    assert inspect.signature(build_session).parameters["spark_log_level"].default == "error"
    text = log4j2_properties("error")
    assert "rootLogger.level = error" in text
    assert "logger.shell0.level = error" in text  # no 'Setting default log level' line
    assert "appender.console.target = SYSTEM_ERR" in text
    assert "rootLogger.level = warn" in log4j2_properties("warn")
    with pytest.raises(ValueError, match="spark log level 'loud'"):
        log4j2_properties("loud")
