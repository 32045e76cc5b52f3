"""What the metrics cost: delivered events/s with and without someone reading them.

Run: ``python -m bench.metrics_cost`` (defaults: 10 apps, 10 s windows, 3 runs).
The set-up is ``bench.e2e``'s throughput run (a middleware process, one
provider process publishing as fast as it can, the apps in this process, all
subscribed ``ON_UPDATE`` to 100 keys), measured in three modes, alternated run
by run so the machine's drift spreads over all of them:

* ``off``: no metrics endpoint, nobody reads the figures (the default);
* ``scraped``: ``--metrics-listen`` on, a Prometheus-like scraper (its own
  process) fetching ``/metrics`` every ``--interval`` seconds;
* ``top``: ``python -m vehicle_middleware.tools top``'s refresh (``GetStats`` and the
  rendering of a frame, its own process) every ``--interval`` seconds.

It prints delivered events/s per run and mode, the median's cost against
``off`` (the target: under 2 %), and what one reading costs: the
scrape's and ``GetStats``' round trip (mostly the middleware's work: read the
cores, build the text or message) and the frame's rendering, p50 and p99, and
the size of the text. ``--seconds 1 --runs 1 --apps 2`` is a quick smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import urllib.request
from typing import Final

import grpc
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2, admin_pb2_grpc
from vehicle_middleware.tools.top import render

from bench.e2e import measure, middleware, stop

MODES: Final = ("off", "scraped", "top")


# -- the readers (each its own process) ------------------------------------------------


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def scrape_main(url: str, interval: float, seconds: float) -> None:
    """Fetch ``url`` every ``interval`` s for ``seconds``; print timings as JSON."""
    took: list[float] = []
    size = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as response:
            size = len(response.read())
        took.append(time.perf_counter() - t0)
        time.sleep(max(0.0, interval - (time.perf_counter() - t0)))
    print(
        json.dumps({"n": len(took), "p50": _ms(took, 0.5), "p99": _ms(took, 0.99), "bytes": size})
    )


async def top_main(target: str, interval: float, seconds: float) -> None:
    """Refresh like ``top`` every ``interval`` s for ``seconds``; print timings as JSON."""
    calls: list[float] = []
    renders: list[float] = []
    previous = None
    async with grpc.aio.insecure_channel(target) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            stats = await stub.GetStats(
                admin_pb2.GetStatsRequest(top_keys=20), metadata=(("app-id", "bench-top"),)
            )
            t1 = time.perf_counter()
            render(stats, previous, target=target, width=160, height=60)
            t2 = time.perf_counter()
            calls.append(t1 - t0)
            renders.append(t2 - t1)
            previous = stats
            await asyncio.sleep(max(0.0, interval - (t2 - t0)))
    print(
        json.dumps(
            {
                "n": len(calls),
                "p50": _ms(calls, 0.5),
                "p99": _ms(calls, 0.99),
                "render_p50": _ms(renders, 0.5),
                "render_p99": _ms(renders, 0.99),
            }
        )
    )


# -- the runs ---------------------------------------------------------------------------


async def run_mode(mode: str, args: argparse.Namespace) -> tuple[float, dict[str, float]]:
    """Delivered events/s in one mode, and the reader's timings."""
    extra = ("--metrics-listen", "127.0.0.1:0") if mode == "scraped" else ()
    mw, address = middleware(*extra)
    reader: asyncio.subprocess.Process | None = None
    try:
        if mode != "off":
            who = ["top", "--target", address]
            if mode == "scraped":
                assert mw.stdout is not None
                line = mw.stdout.readline()  # "metrics on http://HOST:PORT/metrics"
                who = ["scrape", "--url", line.split()[-1]]
            reader = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.metrics_cost", *who,
                "--interval", str(args.interval), "--seconds", str(args.seconds + 2.0),
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
        _, rate = await measure(
            address,
            args.apps,
            provider_rate=0,
            seconds=args.seconds,
            latency=False,
            subscribe=True,
        )
        timings: dict[str, float] = {}
        if reader is not None:
            out, _ = await asyncio.wait_for(reader.communicate(), args.seconds + 30)
            timings = json.loads(out.decode().strip().splitlines()[-1])
        return rate, timings
    finally:
        if reader is not None and reader.returncode is None:
            reader.kill()
            await reader.wait()
        stop(mw)


async def bench(args: argparse.Namespace) -> None:
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    timings: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    print(f"{args.apps} apps, {args.seconds:g} s windows, readers every {args.interval:g} s")
    print(f"{'run':>4} " + " ".join(f"{m + ' /s':>14}" for m in MODES))
    for run in range(1, args.runs + 1):
        row = []
        for mode in MODES:
            rate, timing = await run_mode(mode, args)
            rates[mode].append(rate)
            timings[mode].append(timing)
            row.append(rate)
        print(f"{run:4d} " + " ".join(f"{r:14,.0f}" for r in row), flush=True)
    base = statistics.median(rates["off"])
    print("\nmedian delivered/s, and the cost against off (target: under 2 %)")
    for mode in MODES:
        median = statistics.median(rates[mode])
        cost = 1 - median / base if base else float("nan")
        print(f"  {mode:8} {median:12,.0f}/s  cost {cost:6.1%}  (runs {rates[mode]})")
    scrape = [t for t in timings["scraped"] if t]
    top = [t for t in timings["top"] if t]
    if scrape:
        print(
            f"\none scrape of /metrics: p50 {statistics.median(t['p50'] for t in scrape):.2f} ms, "
            f"p99 {max(t['p99'] for t in scrape):.2f} ms, {scrape[-1]['bytes']:,} bytes "
            f"({sum(int(t['n']) for t in scrape)} scrapes)"
        )
    if top:
        print(
            f"one top refresh: GetStats p50 {statistics.median(t['p50'] for t in top):.2f} ms, "
            f"p99 {max(t['p99'] for t in top):.2f} ms; rendering the frame p50 "
            f"{statistics.median(t['render_p50'] for t in top):.2f} ms, p99 "
            f"{max(t['render_p99'] for t in top):.2f} ms "
            f"({sum(int(t['n']) for t in top)} refreshes)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_cost", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    scrape = sub.add_parser("scrape", help="(internal) the scraper process")
    scrape.add_argument("--url", required=True)
    top = sub.add_parser("top", help="(internal) the top-refresh process")
    top.add_argument("--target", required=True)
    for p in (scrape, top, parser):
        p.add_argument("--interval", type=float, default=1.0, help="seconds between readings")
        p.add_argument("--seconds", type=float, default=10.0, help="measured window per run")
    parser.add_argument("--apps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3, help="runs of each mode, alternated")
    args = parser.parse_args(argv)
    if args.command == "scrape":
        scrape_main(args.url, args.interval, args.seconds)
    elif args.command == "top":
        asyncio.run(top_main(args.target, args.interval, args.seconds))
    else:
        asyncio.run(bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
