"""``python -m vmw.demo.spark [OPTIONS] INGEST -- ANALYZE``: the demo's Spark
step, two ``python -m vmw.fleet`` command lines run in one Spark session.

``INGEST`` is ``ingest --input LANDING --output DATASET --stream --once`` (the
streaming ingest: Structured Streaming over the landing area, availableNow)
and ``ANALYZE`` is ``analyze --input DATASET --output REPORT [...]``; OPTIONS
are the command's own (``--master``, ``--shuffle-partitions``). Both are
parsed by ``vmw.fleet``'s own parser, so they mean exactly what they
mean there, and run the same jobs (``job.ingest_stream``, ``job.analyze``).
In one JVM they spare the demo a second JVM's start and warm-up: about 20 s
of its minute on two cores.

Prints one JSON object: ``{"ingest": counts, "ingest_s": seconds,
"analysis": summary, "analysis_s": seconds}``. SIGINT or SIGTERM stop it;
either way the JVM has exited when it returns.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import FrameType
from typing import NoReturn

__all__ = ["main"]


def _interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--" not in args:
        raise SystemExit("usage: python -m vmw.demo.spark [OPTIONS] INGEST -- ANALYZE")
    cut = args.index("--")
    from vmw.fleet.__main__ import analyze_options, parser

    ingest, analyze = parser().parse_args(args[:cut]), parser().parse_args(args[cut + 1 :])
    if ingest.command != "ingest" or not (ingest.stream and ingest.once):
        raise SystemExit("the first command must be: ingest --stream --once ...")
    if len(ingest.input) != 1:
        raise SystemExit(f"--stream reads one landing area, got {len(ingest.input)} inputs")
    if analyze.command != "analyze":
        raise SystemExit("the second command must be: analyze ...")
    signal.signal(signal.SIGTERM, _interrupted)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from vmw.fleet import job
    from vmw.fleet.session import build_session, stop_session

    spark = build_session(ingest.master, shuffle_partitions=ingest.shuffle_partitions)
    try:
        t = time.monotonic()
        counts = job.ingest_stream(
            spark,
            ingest.input[0],
            ingest.output,
            checkpoint=ingest.checkpoint,
            once=True,
            max_files_per_trigger=ingest.max_files_per_trigger,
        )
        ingest_s = time.monotonic() - t
        t = time.monotonic()
        summary = job.analyze(spark, analyze.input, analyze.output, **analyze_options(analyze))
        analysis_s = time.monotonic() - t
    finally:
        stop_session(spark)
    result = {"ingest": counts, "ingest_s": ingest_s, "analysis": summary, "analysis_s": analysis_s}
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
