"""``bench.instructions``: its scenarios run the server's own steps.

The counting itself needs valgrind and minutes (``make bench-instructions``);
here each scenario runs a few rounds in this process, so that a change to the
classes it drives breaks this test, not the benchmark on the day it is needed.
"""

from __future__ import annotations

import pytest

from bench import instructions


@pytest.mark.parametrize("name", sorted(instructions.SCENARIOS))
def test_each_scenario_runs_its_rounds(name: str) -> None:
    """Each runs as counted; the KUKSA one asserts that the publish reader took
    every publish (else the count would be of protobuf's way, not the reader's),
    ``own full`` that each round's records reached its journal's segment."""
    assert instructions.run(name, 3, instructions.WARMUP + 3) == 0
