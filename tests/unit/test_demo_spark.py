"""The demo's Spark step refuses command lines it would not run as written (no Spark started)."""

from __future__ import annotations

import pytest
from vmw.demo.spark import main

INGEST = ["ingest", "--input", "landing", "--output", "dataset", "--stream", "--once"]
ANALYZE = ["analyze", "--input", "dataset", "--output", "report"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*INGEST, *ANALYZE], "usage: python -m vmw.demo.spark"),
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
