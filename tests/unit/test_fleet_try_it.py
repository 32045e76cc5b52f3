"""docs/fleet.md's "Try it": synth, ingest, analyze, each reading what the step
before wrote."""

from __future__ import annotations

import shlex
from pathlib import Path

from vehicle_middleware.telemetry_export.__main__ import parser

FLEET = Path(__file__).parents[2] / "docs" / "fleet.md"


def test_the_try_it_sequence_reads_where_each_step_before_wrote() -> None:
    section = FLEET.read_text().split("## Try it\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    commands = [shlex.split(line) for line in block.splitlines() if line.strip()[:1] != "#"]
    args = [parser().parse_args(words[3:]) for words in commands]
    assert [a.command for a in args] == ["synth", "ingest", "analyze"]
    synth, ingest, analyze = args
    assert ingest.input == [synth.output]
    assert analyze.input == ingest.output
