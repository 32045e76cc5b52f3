"""``python -m vehicle_middleware.telemetry_export collect|ingest|analyze|synth``: see
docs/fleet.md."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any

__all__ = ["analyze_options", "main", "parser", "synth_options"]


def _thresholds(values: list[str]) -> list[tuple[str, int]]:
    out = []
    for v in values:
        prefix, sep, seconds = v.rpartition("=")
        if not sep or not prefix:
            raise SystemExit(f"--stale {v!r}: use KEY_PREFIX=SECONDS, e.g. Vehicle.Cabin=30")
        out.append((prefix, int(float(seconds) * 1e9)))
    return out


def analyze_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`vehicle_middleware.telemetry_export.job.analyze` that the
    flags of ``analyze`` (or ``report``) give."""
    return {
        "thresholds": _thresholds(args.stale),
        "default_stale_ns": int(args.stale_default * 1e9),
        "window_ns": int(args.window * 1e9),
    }


def synth_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`vehicle_middleware.telemetry_export.synth.write_fleet` that
    the flags of ``synth`` give."""
    return {
        "vehicles": args.vehicles,
        "records": args.records,
        "seed": args.seed,
        "tamper": args.tamper,
        "trim": args.trim,
    }


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = argparse.ArgumentParser(
        prog="python -m vehicle_middleware.telemetry_export", description=__doc__
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL (default: local[*], or what spark-submit set)",
    )
    parser.add_argument("--shuffle-partitions", type=int, default=16)
    sub = parser.add_subparsers(dest="command", required=True)
    ing = sub.add_parser(
        "ingest", help="journal directories or a landing area -> validated Parquet dataset"
    )
    ing.add_argument(
        "--input",
        required=True,
        nargs="+",
        help="journal files or directories, or landing areas (one with --stream)",
    )
    ing.add_argument("--output", required=True, help="dataset directory or URI")
    ing.add_argument(
        "--stream",
        action="store_true",
        help="a streaming query over the landing area: each new file once, appended "
        "to the dataset exactly once (without it: the dataset is replaced)",
    )
    ing.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="the streaming query's checkpoint (default OUTPUT/_checkpoint)",
    )
    ing.add_argument(
        "--once", action="store_true", help="with --stream: ingest what is there, then stop"
    )
    ing.add_argument(
        "--every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --stream: a micro-batch every SECONDS (default 10)",
    )
    ing.add_argument(
        "--max-files-per-trigger",
        type=int,
        default=None,
        metavar="N",
        help="with --stream: at most N landing files per micro-batch",
    )
    ana = sub.add_parser("analyze", help="dataset -> findings, summary.json, report.md")
    ana.add_argument("--input", required=True, help="the dataset written by ingest")
    ana.add_argument("--output", required=True, help="report directory (tables, summary, report)")
    rep = sub.add_parser(
        "report", help="ingest then analyze in one go: OUTPUT/dataset and OUTPUT/report"
    )
    rep.add_argument("--input", required=True, nargs="+", help="journal files or directories")
    rep.add_argument("--output", required=True, help="directory for the dataset and the report")
    for p in (ana, rep):
        p.add_argument(
            "--stale",
            action="append",
            default=[],
            metavar="PREFIX=SECONDS",
            help="staleness threshold for keys under PREFIX (repeatable)",
        )
        p.add_argument("--stale-default", type=float, default=5.0, metavar="SECONDS")
        p.add_argument(
            "--window",
            type=float,
            default=1.0,
            metavar="SECONDS",
            help="time window of the drop rates",
        )
    from vehicle_middleware.telemetry_export.collect import add_collect_parser

    add_collect_parser(sub)
    for spark_command in (ing, ana, rep):
        spark_command.add_argument(
            "--log-level",
            default="info",
            choices=["debug", "info", "warning", "error"],
            help="this program's log lines on stderr (default info: a line per ingest "
            "batch and micro-batch; Spark's own log is apart)",
        )
        spark_command.add_argument(
            "--spark-log-level",
            default="error",
            choices=["error", "warn", "info", "debug"],
            help="Spark's own log lines on stderr (default error: its warnings, such as "
            "those of a local session starting, are left out; warn brings them back)",
        )
    syn = sub.add_parser("synth", help="write a synthetic fleet of journals")
    syn.add_argument("--output", required=True)
    syn.add_argument("--vehicles", type=int, default=3)
    syn.add_argument("--records", type=int, default=10_000, help="about this many per vehicle")
    syn.add_argument("--seed", type=int, default=1)
    syn.add_argument("--tamper", action="store_true", help="edit one record of one vehicle")
    syn.add_argument(
        "--trim",
        action="store_true",
        help="remove the first segment of one boot, as the journal's retention does",
    )
    return parser


def _ingest(spark: Any, args: argparse.Namespace) -> dict[str, int]:
    from vehicle_middleware.telemetry_export import job

    if not args.stream:
        if args.checkpoint or args.once:
            raise SystemExit("--checkpoint and --once go with --stream")
        return job.ingest(spark, args.input, args.output)
    if len(args.input) != 1:
        raise SystemExit(f"--stream reads one landing area, got {len(args.input)} inputs")
    if args.every <= 0:
        raise SystemExit(f"--every must be above 0 seconds, got {args.every:g}")

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        return job.ingest_stream(
            spark,
            args.input[0],
            args.output,
            checkpoint=args.checkpoint,
            once=args.once,
            every_s=args.every,
            max_files_per_trigger=args.max_files_per_trigger,
        )
    except KeyboardInterrupt:
        print("ingest: stopped", file=sys.stderr)
        return {}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    if args.command == "collect":
        from vehicle_middleware.telemetry_export.collect import collect_main

        return collect_main(args)

    if args.command == "synth":
        from vehicle_middleware.telemetry_export.synth import write_fleet

        facts = write_fleet(args.output, **synth_options(args))
        print(json.dumps(facts, indent=2, sort_keys=True))
        return 0

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.master is None or args.master.startswith("local"):
        # A local run listens on loopback unless told otherwise (SPARK_LOCAL_IP): by
        # default Spark picks the first non-loopback address of the host.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per JVM call at INFO
    from vehicle_middleware.telemetry_export import job
    from vehicle_middleware.telemetry_export.session import build_session, stop_session

    spark = build_session(
        args.master,
        shuffle_partitions=args.shuffle_partitions,
        spark_log_level=args.spark_log_level,
    )
    try:
        if args.command == "ingest":
            print(json.dumps(_ingest(spark, args)))
        else:
            dataset, report = args.input, args.output
            if args.command == "report":
                dataset, report = f"{args.output}/dataset", f"{args.output}/report"
                job.ingest(spark, args.input, dataset)
            summary = job.analyze(spark, dataset, report, **analyze_options(args))
            print(json.dumps(summary, indent=2, sort_keys=True))
    finally:
        stop_session(spark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
