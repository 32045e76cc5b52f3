"""``make demo`` (``python -m vehicle_middleware.demo``): the whole system, its export, its
analysis.

1. Starts a middleware on 127.0.0.1 (a free port) with its telemetry journal
   at level ``full`` in ``OUT/journal``;
2. the collector (``python -m vehicle_middleware.telemetry_export collect --follow``, component
   ``demo``): a reliable consumer of the middleware's JournalService, landing
   the journal as it is written into ``OUT/landing`` (the landing contract);
3. the simulated car (``python -m vehicle_middleware.providers sim --claim``, about 270 keys, 690
   updates/s), with one fault: the cabin zone sensors go quiet for a while;
   the middleware expects them every ``threshold`` seconds (``--expect``), so
   the apps are told live (``KeyStale``, then ``KeyFresh``), and when the
   provider stops they are told it is gone (``ProviderGone``);
4. two apps: ``logger`` (reads everything, writes ``OUT/apps/logger.jsonl``)
   and ``slow`` (reads one batch per second, so the middleware must drop);
5. runs for ``--duration`` seconds with a progress line, then stops the
   provider, lets the apps read what is left and stops them; stops the
   middleware, whose journal hands the collector its last records (``stop``
   included) before it exits, and then the collector (see :func:`_stop`);
6. Spark: ``ingest --stream --once`` (Structured Streaming, availableNow,
   checkpointed in ``OUT/dataset/_checkpoint``) takes the landing area into
   the dataset ``OUT/dataset``, and ``analyze`` writes ``OUT/report``, in one
   Spark session (:mod:`vehicle_middleware.demo.spark`: a minute or two on two cores,
   its stages and heartbeats shown as they come); then the demo prints what each
   app saw beside what the journal says, whether every gap is explained, and
   whether the dataset holds every record the journal on disk holds, once
   and unaltered (:mod:`vehicle_middleware.demo.export`).

Everything it starts it stops, also on Ctrl-C or an error. Logs of every
process are in ``OUT/logs``; the verdict as JSON in ``OUT/demo-summary.json``.
Exit status: 0 if the apps, the journal and the export agree, 1 if not, 130
on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from vehicle_middleware.demo.export import Collected, check_export
from vehicle_middleware.demo.processes import DemoError, Supervisor, last_json
from vehicle_middleware.demo.spark import PREFIX
from vehicle_middleware.demo.summary import judge, render
from vehicle_middleware.sdk.status_file import read_status

__all__ = ["main"]

APPS = ("logger", "slow")
STALLED = "Vehicle.Cabin.HVAC.Zone"
VEHICLE = "demo-car"
COMPONENT = "demo"
"""The collector's consumer component (and its name in the landing area's lease)."""
_OUTPUTS = (
    "journal",
    "apps",
    "logs",
    "landing",
    "dataset",
    "report",
    "demo-summary.json",
)
_INFO = ("--log-level", "INFO")  # its "from boot" line says it registered
_LANDED = re.compile(r"collect(?: done)?: ([\d,]+) records landed")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vehicle_middleware.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds (default 20)")
    parser.add_argument("--out", type=Path, default=Path("demo-out"), help="default ./demo-out")
    parser.add_argument("--rate-scale", type=float, default=1.0, help="provider rates times this")
    parser.add_argument("--no-analysis", action="store_true", help="skip Spark: ingest, analysis")
    parser.add_argument(
        "--middleware-python",
        default=sys.executable,
        help="the Python that runs the middleware (default this one; `make demo` passes the "
        "compiled build's where it was built)",
    )
    return parser


def _python() -> str:
    """This interpreter, as a newcomer would type it (``.venv/bin/python``)."""
    exe = Path(sys.executable)
    try:
        return str(exe.relative_to(Path.cwd()))
    except ValueError:
        return str(exe)


def _interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def _prepare(out: Path) -> None:
    """Empty what a previous run left in ``out`` (only the demo's own outputs)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in _OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for name in ("journal", "apps", "logs"):
        (out / name).mkdir()


def _landed(sup: Supervisor) -> str:
    """What the collector's newest progress line says it landed (``collect: N records landed``)."""
    child = sup.children.get("collector")
    m = _LANDED.search(child.last_line) if child is not None else None
    return m.group(1) if m else "0"


def _progress(sup: Supervisor, out: Path, elapsed: float, duration: float) -> str:
    provider = read_status(out / "apps" / "vehicle-sim.json") or {}
    parts = [f"[{elapsed:4.0f}/{duration:.0f} s] published {provider.get('published', 0):>7,}"]
    for app in APPS:
        s = read_status(out / "apps" / f"{app}.json") or {}
        parts.append(
            f"{app} read {s.get('received', 0):>7,} gaps {s.get('missed', 0):>5,} "
            f"stale {len(s.get('stale', ())):>2}"
        )
    parts.append(f"landed {_landed(sup):>7}")
    return " | ".join(parts)


def _start_middleware(sup: Supervisor, out: Path, threshold: float, python: str) -> str:
    """The middleware, run by ``python``, with its journal; its address."""
    sup.start(
        "middleware",
        [
            python, "-m", "vehicle_middleware.server", "serve",
            "--listen", "127.0.0.1:0",
            "--journal-dir", str(out / "journal"),
            "--journal-level", "full",
            "--vehicle-id", VEHICLE,
            "--expect", f"{STALLED}={threshold:g}",
        ],
    )  # fmt: skip
    codecs = sup.wait_for_line("middleware", r"codecs: (.+)$", 30)[1]
    address = sup.wait_for_line("middleware", r"listening on (\S+)", 30)[1]
    print(f"middleware  listening on {address}, journal at level full in {out / 'journal'}")
    print(f"            codecs {codecs}, run by {python}")
    return address


def _collect(address: str, out: Path, *mode: str) -> list[str]:
    """``collect`` of the demo's middleware into ``OUT/landing``, in ``mode``."""
    return [
        sys.executable, "-m", "vehicle_middleware.telemetry_export", "collect",
        "--from", address,
        "--to", str(out / "landing"),
        "--component", COMPONENT,
        "--name", COMPONENT,  # its holder's name in the lease
        *mode,
    ]  # fmt: skip


def _start_car(
    sup: Supervisor, args: argparse.Namespace, address: str, stall: tuple[float, float]
) -> None:
    """The simulated car (one provider) and the apps, each started and waited for."""
    out: Path = args.out
    sup.start(
        "provider",
        [
            sys.executable, "-m", "vehicle_middleware.providers", "sim",
            "--target", address,
            "--status", str(out / "apps" / "vehicle-sim.json"),
            "--rate-scale", str(args.rate_scale),
            "--stall", f"{STALLED}={stall[0]:g}:{stall[1]:g}",
            "--claim",
        ],
    )  # fmt: skip
    sup.wait_for_line("provider", r"publishing \d+ keys", 30)
    for app in APPS:
        sup.start(
            app,
            [
                sys.executable, "-m", "vehicle_middleware.apps", app,
                "--target", address,
                "--status", str(out / "apps" / f"{app}.json"),
                *(["--out", str(out / "apps" / "logger.jsonl")] if app == "logger" else []),
            ],
        )  # fmt: skip
    for app in APPS:
        sup.wait_for_line(app, r"subscribed to \d+ keys", 30)


def _run_for(sup: Supervisor, out: Path, duration: float) -> None:
    """Let it run, with a progress line; raises DemoError if a process exits."""
    tty = sys.stdout.isatty()
    t0 = time.monotonic()
    last_line = 0.0
    while (elapsed := time.monotonic() - t0) < duration:
        sup.check_running()
        if tty:
            print("\r" + _progress(sup, out, elapsed, duration), end="", flush=True)
        elif elapsed - last_line >= 5:
            print(_progress(sup, out, elapsed, duration), flush=True)
            last_line = elapsed
        time.sleep(min(0.5, max(0.0, duration - elapsed)))
    if tty:
        print("\r" + _progress(sup, out, duration, duration))


def _stop(sup: Supervisor, out: Path, address: str) -> Collected:
    """Stop everything in an order that leaves every record the journal wrote in
    the landing area; the collector's own counts.

    The provider first, then the apps (they read what is still queued for
    them), so the journal has little more to write; then the middleware: it
    ends every other call, writes its last record (``stop``) and lets its
    journal's followers take it before it exits; then the collector (SIGINT:
    it lands what it holds and stores its position).
    """
    print(
        "stopping    provider, then apps (they read what is left), then middleware "
        "(its journal's last records go to the collector), then the collector"
    )
    statuses = {"provider": sup.stop("provider")}
    statuses |= {app: sup.stop(app, timeout=30) for app in APPS}
    statuses["middleware"] = sup.stop("middleware")
    statuses["collector"] = sup.stop("collector")
    failed = {name: code for name, code in statuses.items() if code}
    if failed:
        raise DemoError(f"a process exited with an error ({failed}); see {out / 'logs'}")
    follow = last_json((out / "logs" / "collector.log").read_text(errors="replace"))
    collected = Collected.of(follow, VEHICLE)
    print(f"collector   landed {collected.landed:,} journal records in {out / 'landing'}")
    return collected


def _spark_progress(line: str) -> None:
    """Show a progress line of the Spark step (``spark: ...``) as it comes:
    starting its session and the ingest take a while on two cores."""
    if line.startswith(PREFIX):
        print(f"spark       {line.removeprefix(PREFIX)}", flush=True)


def _analyse(sup: Supervisor, out: Path, threshold: float) -> dict[str, Any]:
    """Spark: the landing area into the dataset (the streaming ingest, once), then
    the dataset's analysis, in one Spark session (:mod:`vehicle_middleware.demo.spark`);
    the analysis' summary."""
    ingest = [
        "ingest",
        "--input", str(out / "landing"),
        "--output", str(out / "dataset"),  # checkpointed in its _checkpoint
        "--stream", "--once",
    ]  # fmt: skip
    analyze = [
        "analyze",
        "--input", str(out / "dataset"),
        "--output", str(out / "report"),
        "--stale", f"{STALLED}={threshold:g}",
        "--stale-default", "60",
    ]  # fmt: skip
    print("spark       the streaming ingest, once, then the analysis, in one Spark session:")
    for argv in (ingest, analyze):
        print(f"              {_python()} -m vehicle_middleware.telemetry_export {' '.join(argv)}")
    t = time.monotonic()
    stdout = sup.run(
        "spark",
        [
            sys.executable, "-m", "vehicle_middleware.demo.spark",
            "--master", "local[2]", "--shuffle-partitions", "2",
            *ingest, "--", *analyze,
        ],
        timeout=900,
        on_line=_spark_progress,
    )  # fmt: skip
    done: dict[str, Any] = last_json(stdout)
    if not done:
        raise DemoError(f"the Spark step printed no result; see {out / 'logs' / 'spark.log'}")
    n = done["ingest"]
    print(
        f"ingest      {n.get('lines', 0):,} journal lines ({n.get('records', 0):,} events) in "
        f"{n.get('batches', 0)} micro-batch(es), {n.get('duplicates', 0):,} duplicates left out: "
        f"{done['ingest_s']:.0f} s"
    )
    print(
        f"analysis    gaps, staleness, drops, restarts: {done['analysis_s']:.0f} s "
        f"({time.monotonic() - t:.0f} s with the session's start)"
    )
    analysis: dict[str, Any] = done["analysis"]
    return analysis


def run(args: argparse.Namespace, sup: Supervisor) -> dict[str, Any]:
    """The demo's steps; returns the verdict as a dict (also written to OUT)."""
    out: Path = args.out
    duration = args.duration
    threshold = max(1.5, 0.2 * duration)

    address = _start_middleware(sup, out, threshold, args.middleware_python)
    # From the start: a new reliable consumer would read the journal from its
    # oldest record anyway, but following from the first shows the export live.
    sup.start("collector", _collect(address, out, "--follow", "--progress-s", "1", *_INFO))
    _start_car(sup, args, address, (0.25 * duration, 0.4 * duration))
    sup.wait_for_line("collector", r"collect: \S+ \(\S+\) from boot", 30)
    print(f"collector   following the journal into {out / 'landing'}")
    print(f"apps        {', '.join(APPS)} subscribed; running for {duration:g} s")
    print(
        f"            (live view: {_python()} -m vehicle_middleware.apps dashboard "
        f"--target {address})"
    )
    _run_for(sup, out, duration)
    collected = _stop(sup, out, address)
    provider = read_status(out / "apps" / "vehicle-sim.json") or {}
    apps = {app: read_status(out / "apps" / f"{app}.json") or {} for app in APPS}

    analysis = None if args.no_analysis else _analyse(sup, out, threshold)
    export = check_export(
        out / "journal",
        out / "landing",
        None if args.no_analysis else out / "dataset",
        collected=collected,
    )
    verdict = judge(provider, apps, analysis, export)
    result = verdict.as_dict()
    result.update(duration=duration, address=address, out=str(out))
    (out / "demo-summary.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    report = (
        f"{out / 'report' / 'report.md'} (plots: drops.png, staleness.png; "
        f"tables: {out / 'report'}/*/; verdict: {out / 'demo-summary.json'})"
        if analysis
        else "(analysis skipped)"
    )
    print()
    print(render(verdict, report=report))
    return result


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.duration <= 0:
        raise SystemExit("--duration must be above 0")
    # Ctrl-C (also when started where SIGINT is ignored) and SIGTERM both end
    # in the `finally` below, which stops the children.
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    _prepare(args.out)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",
        # The analysis reads a few thousand records: its JVM starts in about half
        # the CPU time with the first compiler tier and the serial collector, and
        # the optimising compiler would never pay back. An operator's own value wins.
        "SPARK_SUBMIT_OPTS": os.environ.get(
            "SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        ),
    }
    sup = Supervisor(args.out / "logs", env)
    print(f"== vehicle-middleware demo: {args.duration:g} s; outputs in {args.out}/ ==")
    try:
        result = run(args, sup)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping everything the demo started", file=sys.stderr)
        return 130
    except DemoError as e:
        print(f"\ndemo failed: {e}", file=sys.stderr)
        return 1
    finally:
        # The provider first, so the apps' final reads end at once; the
        # middleware last, so the journal records everything until the end.
        # The collector after it, so it takes the journal's last records.
        sup.stop_all(order=["spark", "provider", *APPS, "middleware", "collector"])
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
