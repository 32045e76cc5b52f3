"""``python -m vehicle_middleware.demo.spark [OPTIONS] INGEST -- ANALYZE``: the demo's Spark
step, two ``python -m vehicle_middleware.telemetry_export`` command lines run in one Spark session.

``INGEST`` is ``ingest --input LANDING --output DATASET --stream --once`` (the
streaming ingest: Structured Streaming over the landing area, availableNow)
and ``ANALYZE`` is ``analyze --input DATASET --output REPORT [...]``; OPTIONS
are the command's own (``--master``, ``--shuffle-partitions``). Both are
parsed by ``vehicle_middleware.telemetry_export``'s own parser, so they mean exactly what they
mean there, and run the same jobs (``job.ingest_stream``, ``job.analyze``).
In one JVM they spare the demo a second JVM's start and warm-up, a large
part of its Spark step on a small machine.

While it works it says so on stdout, a line per stage (the session's start,
the ingest, the analysis, the session's stop) as it starts and as it ends,
and a heartbeat every :data:`HEARTBEAT_S` seconds while one runs (with the
Spark tasks done so far), each line starting ``spark: ``; the demo shows
them, so its minute or two of Spark is not a silent one (:class:`Progress`).
Its last line is one JSON object: ``{"ingest": counts, "ingest_s": seconds,
"analysis": summary, "analysis_s": seconds}``. SIGINT or SIGTERM stop it;
either way the JVM has exited when it returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Final, NoReturn, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["HEARTBEAT_S", "PREFIX", "Progress", "landing_lines", "main", "spark_tasks"]

HEARTBEAT_S: Final = 10.0
"""Seconds between two "still working" lines of a stage."""
PREFIX: Final = "spark: "
"""How each progress line starts (the result, the last line, is JSON)."""


class Progress:
    """Progress lines on ``out``: a stage's start, a heartbeat every ``every``
    seconds while it runs, its end (or failure) with how long it took.

    ``detail`` (settable: e.g. once a session exists) adds to each heartbeat;
    it runs on the heartbeat's thread, and whatever it raises is left out
    (a heartbeat never takes a stage down).
    """

    def __init__(
        self,
        out: TextIO,
        *,
        every: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._out = out
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self.detail: Callable[[], str] = lambda: ""

    def say(self, text: str) -> None:
        """One line, ``spark: text``, flushed at once."""
        with self._lock:
            self._out.write(f"{PREFIX}{text}\n")
            self._out.flush()

    def _beat(self, what: str, start: float, done: threading.Event) -> None:
        while not done.wait(self._every):
            try:
                extra = self.detail()
            except Exception:  # best effort: e.g. the JVM going away under it
                extra = ""
            self.say(f"{what}: still working, {self._clock() - start:.0f} s{extra}")

    @contextlib.contextmanager
    def stage(self, what: str, starting: str = "") -> Iterator[None]:
        """Say ``what...`` (with ``starting`` after it), heartbeats while the
        block runs, then ``what: done in X s`` or ``what: failed after X s``."""
        self.say(f"{what}{starting}...")
        start = self._clock()
        done = threading.Event()
        beat = threading.Thread(target=self._beat, args=(what, start, done), daemon=True)
        beat.start()
        try:
            yield
        except BaseException:
            done.set()
            beat.join()
            self.say(f"{what}: failed after {self._clock() - start:.1f} s")
            raise
        done.set()
        beat.join()
        self.say(f"{what}: done in {self._clock() - start:.1f} s")


def spark_tasks(spark: SparkSession) -> str:
    """What Spark is doing now, for a heartbeat: its running stages' tasks done."""
    tracker = spark.sparkContext.statusTracker()
    stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
    running = [s for s in stages if s is not None]
    if not running:
        return ""
    done = sum(s.numCompletedTasks for s in running)
    total = sum(s.numTasks for s in running)
    return f" (Spark: {len(running)} stage(s) running, {done}/{total} of their tasks done)"


def landing_lines(landing: Path) -> tuple[int, int]:
    """Journal lines and data files in a landing area (``*.jsonl`` outside the
    collector's ``_``/``.`` bookkeeping): what the ingest is about to read."""
    lines = files = 0
    for path in landing.rglob("*.jsonl"):
        if any(part.startswith(("_", ".")) for part in path.relative_to(landing).parts):
            continue
        with path.open("rb") as fh:
            lines += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        files += 1
    return lines, files


def _interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--" not in args:
        raise SystemExit(
            "usage: python -m vehicle_middleware.demo.spark [OPTIONS] INGEST -- ANALYZE"
        )
    cut = args.index("--")
    from vehicle_middleware.telemetry_export.__main__ import analyze_options, parser

    ingest, analyze = parser().parse_args(args[:cut]), parser().parse_args(args[cut + 1 :])
    if ingest.command != "ingest" or not (ingest.stream and ingest.once):
        raise SystemExit("the first command must be: ingest --stream --once ...")
    if len(ingest.input) != 1:
        raise SystemExit(f"--stream reads one landing area, got {len(ingest.input)} inputs")
    if analyze.command != "analyze":
        raise SystemExit("the second command must be: analyze ...")
    signal.signal(signal.SIGTERM, _interrupted)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from vehicle_middleware.telemetry_export import job
    from vehicle_middleware.telemetry_export.session import build_session, stop_session

    progress = Progress(sys.stdout)
    with progress.stage("starting a session", f" ({ingest.master or 'local[*]'}, a JVM)"):
        spark = build_session(
            ingest.master,
            shuffle_partitions=ingest.shuffle_partitions,
            spark_log_level=ingest.spark_log_level,
        )
    progress.detail = lambda: spark_tasks(spark)
    try:
        lines, files = landing_lines(Path(ingest.input[0]))
        with progress.stage("ingest", f" of {lines:,} journal lines in {files} file(s)"):
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
        with progress.stage("analysis", ": gaps, staleness, drops, restarts"):
            t = time.monotonic()
            summary = job.analyze(spark, analyze.input, analyze.output, **analyze_options(analyze))
            analysis_s = time.monotonic() - t
    finally:
        progress.detail = lambda: ""
        with progress.stage("stopping the session"):
            stop_session(spark)
    result = {"ingest": counts, "ingest_s": ingest_s, "analysis": summary, "analysis_s": analysis_s}
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
