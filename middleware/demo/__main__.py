"""``make demo`` (``python -m middleware.demo``): the whole system, then its gap analysis.

1. Starts a middleware on 127.0.0.1 (a free port) with its telemetry journal
   at level ``full`` in ``OUT/journal``;
2. the simulated car (``python -m providers sim --claim``, about 270 keys, 690
   updates/s), with one fault: the cabin zone sensors go quiet for a while;
   the middleware expects them every ``threshold`` seconds (``--expect``), so
   the apps are told live (``KeyStale``, then ``KeyFresh``), and when the
   provider stops they are told it is gone (``ProviderGone``);
3. two apps: ``logger`` (reads everything, writes ``OUT/apps/logger.jsonl``)
   and ``slow`` (reads one batch per second, so the middleware must drop);
4. runs for ``--duration`` seconds with a progress line, then stops the
   provider, lets the apps read what is left, stops them and the middleware;
5. runs the Spark analysis of the journal (``python -m telemetry_export
   report``) into ``OUT/report``, and prints what each app saw beside what the
   journal says, and whether every gap is explained.

Everything it starts it stops, also on Ctrl-C or an error. Logs of every
process are in ``OUT/logs``; the verdict as JSON in ``OUT/demo-summary.json``.
Exit status: 0 if the apps and the journal agree, 1 if not, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from middleware.demo.processes import DemoError, Supervisor
from middleware.demo.summary import judge, render
from middleware.status_file import read_status

__all__ = ["main"]

APPS = ("logger", "slow")
STALLED = "Vehicle.Cabin.HVAC.Zone"
_OUTPUTS = ("journal", "apps", "logs", "dataset", "report", "demo-summary.json")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m middleware.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds (default 20)")
    parser.add_argument("--out", type=Path, default=Path("demo-out"), help="default ./demo-out")
    parser.add_argument("--rate-scale", type=float, default=1.0, help="provider rates times this")
    parser.add_argument("--no-analysis", action="store_true", help="skip the Spark analysis")
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


def _progress(out: Path, elapsed: float, duration: float) -> str:
    provider = read_status(out / "apps" / "vehicle-sim.json") or {}
    parts = [f"[{elapsed:4.0f}/{duration:.0f} s] published {provider.get('published', 0):>7,}"]
    for app in APPS:
        s = read_status(out / "apps" / f"{app}.json") or {}
        parts.append(
            f"{app} read {s.get('received', 0):>7,} gaps {s.get('missed', 0):>5,} "
            f"stale {len(s.get('stale', ())):>2}"
        )
    return " | ".join(parts)


def run(args: argparse.Namespace, sup: Supervisor) -> dict[str, Any]:
    """The demo's steps; returns the verdict as a dict (also written to OUT)."""
    out: Path = args.out
    py = sys.executable
    duration = args.duration
    stall_start, stall_for = 0.25 * duration, 0.4 * duration
    threshold = max(1.5, 0.2 * duration)

    sup.start(
        "middleware",
        [
            py, "-m", "middleware", "serve",
            "--listen", "127.0.0.1:0",
            "--journal-dir", str(out / "journal"),
            "--journal-level", "full",
            "--vehicle-id", "demo-car",
            "--expect", f"{STALLED}={threshold:g}",
        ],
    )  # fmt: skip
    address = sup.wait_for_line("middleware", r"listening on (\S+)", 30)[1]
    print(f"middleware  listening on {address}, journal at level full in {out / 'journal'}")
    sup.start(
        "provider",
        [
            py, "-m", "providers", "sim",
            "--target", address,
            "--status", str(out / "apps" / "vehicle-sim.json"),
            "--rate-scale", str(args.rate_scale),
            "--stall", f"{STALLED}={stall_start:g}:{stall_for:g}",
            "--claim",
        ],
    )  # fmt: skip
    sup.wait_for_line("provider", r"publishing \d+ keys", 30)
    for app in APPS:
        sup.start(
            app,
            [
                py, "-m", "middleware.apps", app,
                "--target", address,
                "--status", str(out / "apps" / f"{app}.json"),
                *(["--out", str(out / "apps" / "logger.jsonl")] if app == "logger" else []),
            ],
        )  # fmt: skip
    for app in APPS:
        sup.wait_for_line(app, r"subscribed to \d+ keys", 30)
    print(f"apps        {', '.join(APPS)} subscribed; running for {duration:g} s")
    print(f"            (live view: {_python()} -m middleware.apps dashboard --target {address})")

    tty = sys.stdout.isatty()
    t0 = time.monotonic()
    last_line = 0.0
    while (elapsed := time.monotonic() - t0) < duration:
        sup.check_running()
        if tty:
            print("\r" + _progress(out, elapsed, duration), end="", flush=True)
        elif elapsed - last_line >= 5:
            print(_progress(out, elapsed, duration), flush=True)
            last_line = elapsed
        time.sleep(min(0.5, max(0.0, duration - elapsed)))
    if tty:
        print("\r" + _progress(out, duration, duration))

    print("stopping    provider, then apps (they read what is left), then middleware")
    statuses = [sup.stop("provider")]
    statuses += [sup.stop(app, timeout=30) for app in APPS]
    statuses.append(sup.stop("middleware"))
    if any(statuses):
        raise DemoError(f"a process exited with an error ({statuses}); see {out / 'logs'}")
    provider = read_status(out / "apps" / "vehicle-sim.json") or {}
    apps = {app: read_status(out / "apps" / f"{app}.json") or {} for app in APPS}

    analysis: dict[str, Any] | None = None
    if not args.no_analysis:
        print("analysis    Spark: ingest the journal, find gaps, staleness, drops, restarts...")
        t = time.monotonic()
        stdout = sup.run(
            "analysis",
            [
                py, "-m", "telemetry_export", "--master", "local[2]", "--shuffle-partitions", "2",
                "report",
                "--input", str(out / "journal"),
                "--output", str(out),
                "--stale", f"{STALLED}={threshold:g}",
                "--stale-default", "60",
            ],
            timeout=600,
        )  # fmt: skip
        analysis = json.loads(stdout)
        print(f"            done in {time.monotonic() - t:.0f} s")
    verdict = judge(provider, apps, analysis)
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
        sup.stop_all(order=["analysis", "provider", *APPS, "middleware"])
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
