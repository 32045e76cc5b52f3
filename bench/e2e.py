"""End-to-end benchmark: a provider -> the middleware -> apps over gRPC on loopback,
each figure beside a floor measured in the same run.

Run: ``make bench-e2e`` (``python -m bench.e2e --stuck-seconds 60 --lag-seconds 5
--journal-compare``). Three processes share the machine's two cores: the server
(the middleware, or a bare floor from ``bench.bare_server``), one provider
process, and the apps (one gRPC channel each, all in this process, subscribed
``ON_UPDATE`` to the same 100 keys). Every server is started here on
``127.0.0.1:0``, one fresh server per window (no state leaks between rows), and
stopped by its pid after it, also on an error.

A window: the apps connect and subscribe, the provider starts, 2 s of warm-up,
then ``--seconds`` (default 6) measured. Latency per event is the receive time
minus the event's ``time_ns`` (the provider's clock when it sent the message);
the receive time is taken as a message arrives, and the apps decode the
window's messages after it, so that their Python decoding competes with
neither the server nor the provider while they are measured.
A paced provider samples on a 1 ms tick: each tick, what is due by then goes at
once, in messages of the load's size (84,000 updates/s in messages of 84: one
message of 84 a tick). The floors:

* the *bare relay* (``bare_server --build relay``): a bare grpc.aio relay that
  decodes each ``Publish`` message, builds one ``EventBatch``, serializes it
  once and writes the same bytes to every app's stream (no store, queues,
  subscriptions, window or journal; what waits on a slow stream goes out
  joined, at most 500 events a write);
* the *ceiling*: the strongest bare grpc.aio server building the same
  messages itself (batches of 64), no provider: the fastest, in the same run,
  of ``bare_server --build add`` (``events.add()`` and field assignment),
  ``--build bytes`` (the bytes put together by hand) and the same compiled by
  mypyc (``--compiled-from``, :func:`compile_ceiling`: where mypyc and a C
  compiler are at hand, as they are wherever ``make`` installed the project);
* the *own API*: for the KUKSA rows, the middleware's own API at the same load
  in the same run.

In the windows of 1-3 the middleware runs with the benchmark's catalog
(``--vss``, :func:`bench.kuksa.catalog`: the 100 keys as ``float`` sensors),
which the KUKSA API needs, so that both APIs write to the same typed signals,
each value checked by the V-Store as a car's middleware checks it. The
providers of both APIs send ``float`` values (a tag and 4 bytes). The
windows of 4-6 run the middleware without a catalog (opaque keys).

What it measures, target by target (the counts of windows in brackets):

1. [2] 1 app, 84,000 updates/s in messages of 84: the middleware delivers
   >= 99% of what was asked, and its p99 is <= 2x the relay's at the same load.
2. [4] 10 apps at 2,000 updates/s and 100 apps at 200 updates/s, messages of 2:
   the middleware delivers >= 99% of what the relay delivers (capped at what was
   asked: a relay that ends its warm-up behind delivers its backlog in the
   measured window too, more than the provider asks in it), p99 <= 2x the relay's.
3. [3] The same three loads through the KUKSA v2 API (``bench.kuksa``: the
   provider on ``OpenProviderStream`` publishing ``PublishValuesRequest``s of
   the same sizes on the same tick, subscribers on v2 ``Subscribe``, whose
   first message, the current values, is not counted): >= 0.95 of the own
   API's delivered rate (capped at what was asked, as the relay's is in 2),
   p99 <= 1.25x the own API's. (Each subscription is an
   app of its own, all of one caller: 100 subscribers hold 10,000
   subscriptions, exactly the middleware's default limit per caller,
   ``--max-subscriptions-per-app``; no limit is raised.)
4. (a) [2] 1 app at 40,000 updates/s in messages of 40: the middleware's CPU
   seconds (utime + stime of its process, over exactly the measured window)
   <= 1.3x the relay's. (b) [2] 10 apps, the provider publishing messages of 64
   as fast as it can: the middleware's delivered events/s >= 0.6x the
   ceiling's [3 ceiling windows]. Information [1 each]: the same full-speed throughput with the
   other app counts of ``--apps`` (1 and 100), and 100 apps per event against
   10 (>= 0.95).
5. [4] With ``--journal-compare``: the journal at ``full`` costs <= 20% of
   ``drops`` at the load of 4b (10 apps, full speed), windows in the order
   drops, full, full, drops, means compared. Information: the server's CPU
   time per delivered event at each level (over the same windows).
6. With ``--stuck-seconds S``: the middleware's RSS is flat (its peak in the
   second half of S is < 2 MiB above its peak in the first: the allocator
   moves the samples up and down by a MiB or so, a leak moves the peak) while
   one app reads nothing and another reads, the
   provider at full speed (no warm-up window). With ``--lag-seconds S``: an app
   reading one batch a second (window 1, queue 200) at 1,000 writes/s never
   receives an event older than its window and queue hold (2 s), after 2 s.

``make bench-e2e``: 21 windows of 2 s + 6 s, each with about 1.2 s more to
start and stop its processes (about 195 s), the compiled ceiling's build (a
few seconds), the stuck app's 60 s and the slow app's 7 s: about 4 minutes
30 s on the 2-core machine (a smoke run, ``--seconds 1
--stuck-seconds 3 --lag-seconds 2 --journal-compare``, takes about 90 s).
``--apps`` picks the app counts (default 1 10 100): each count's load of 1-3,
and its full-speed row (10 always, for 4b). ``--journal LEVEL`` runs the
middleware of 1-4 with its journal at LEVEL; ``--latency-rate R`` adds 1 app at
R updates/s, relay and middleware, as information; ``--compare-sync`` adds the
bare server on grpc.aio beside the same on a thread pool.
The printout ends with the targets table: met / NOT MET, what, the
middleware's figure, the floor's from the same run, the ratio; and the 1-minute
load average at the start and the end: the figures are only as good as the
machine was quiet.
"""

from __future__ import annotations

import os

if __name__ == "__main__":
    # Before grpc is first imported (it reads this then): its INFO lines, such as a
    # client's "Got goaway" when a floor server stops, are noise in the printout.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import argparse
import asyncio
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bench import loads
from bench.kuksa import catalog, run_kuksa
from bench.loads import (
    BATCH,
    KEYS,
    Figure,
    Tally,
    add_keys,
    app_reader,
    cancel,
    ended,
    figure,
    measure,
    middleware,
    pct,
    provider_main,
    rss_kib,
    spawn,
    start_provider,
    started,
    stop,
    timed_window,
)

__all__ = [  # what the other benchmarks import from here
    "BATCH",
    "KEYS",
    "Tally",
    "add_keys",
    "app_reader",
    "main",
    "measure",
    "middleware",
    "pct",
    "rss_kib",
    "spawn",
    "start_provider",
    "stop",
    "timed_window",
]

WARMUP: Final = 2.0
"""Seconds of warm-up before each measured window."""
RELAY_BATCH: Final = 500
"""The relay's most events per write (the middleware's default ``--batch-max``)."""
LAG_QUEUE, LAG_WINDOW = 200, 1  # the slow app's queue (events) and window (batches)
THROUGHPUT_APPS: Final = 10  # target 4b


@dataclass(frozen=True)
class Load:
    """A paced load: ``apps`` apps, ``rate`` updates/s in messages of ``size``."""

    apps: int
    rate: float
    size: int

    def __str__(self) -> str:
        return (
            f"{self.apps} app{'s' if self.apps > 1 else ''}, {self.rate:,.0f}/s"
            f" in msgs of {self.size}"
        )


LOADS: Final = {
    1: Load(1, 84_000, 84),
    10: Load(10, 2_000, 2),
    100: Load(100, 200, 2),
}
"""Targets 1-3, by app count."""
COST_LOAD: Final = Load(1, 40_000, 40)
"""Target 4a."""


# -- the targets table --------------------------------------------------------------


@dataclass
class Targets:
    """Each target: status, what, the middleware's figure, the floor's, the ratio."""

    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)

    def add(self, what: str, mine: str, theirs: str, ratio: float, met: bool | None) -> None:
        """``met`` None: information, not a target."""
        status = "info" if met is None else "met" if met else "NOT MET"
        shown = "-" if math.isnan(ratio) else f"{ratio:.3f}" if ratio < 10 else f"{ratio:.1f}"
        self.rows.append((status, what, mine, theirs, shown))

    def print(self) -> None:
        head = ("", "target", "middleware", "floor (same run)", "ratio")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(5)]
        print("\ntargets")
        for row in [head, *self.rows]:
            print(
                f"  {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}"
                f"  {row[3]:>{widths[3]}}  {row[4]:>{widths[4]}}"
            )


def at_most(mine: float, limit: float, theirs: float) -> bool:
    """``mine <= limit x theirs`` (False where a figure is missing)."""
    return mine <= limit * theirs


def ratio(mine: float, theirs: float) -> float:
    return mine / theirs if theirs else float("nan")


# -- servers and windows ------------------------------------------------------------


Server = Callable[[], tuple[subprocess.Popen[str], str]]


def relay() -> tuple[subprocess.Popen[str], str]:
    return spawn("bench.bare_server", "--build", "relay", "--batch", str(RELAY_BATCH))


async def run_own(
    server: Server,
    apps: int,
    rate: float,
    size: int,
    args: argparse.Namespace,
    *,
    latency: bool = True,
    cpu: bool = False,
) -> Figure:
    """One window of the own API's provider and apps on a fresh ``server``."""
    proc, address = server()
    try:
        tally, delivered = await measure(
            address,
            apps,
            provider_rate=rate,
            seconds=args.seconds,
            latency=latency,
            subscribe=True,
            batch_max=size,
            warmup=WARMUP,
            cpu_pid=proc.pid if cpu else None,
        )
    finally:
        stop(proc)
    return figure(tally, delivered)


def the_middleware(args: argparse.Namespace, vss: Path | None = None) -> Server:
    """The middleware of a window: with ``--journal``'s level, and with the catalog
    ``vss`` where given (``--vss``: the benchmark's keys as ``float`` signals)."""
    catalog = ("--vss", str(vss)) if vss is not None else ()
    return lambda: middleware(*catalog, *journal_args(args))


def row(what: str, f: Figure, asked: float) -> None:
    print(
        f"  {what:<28} {f.rate:>12,.0f} {f.rate / asked:>6.0%} {f.p50:>8.2f} {f.p99:>8.2f}"
        f" {f.per_message:>6.1f}",
        flush=True,
    )


async def delivery(args: argparse.Namespace, targets: Targets, vss: Path) -> None:
    """Targets 1-3: each load through the relay, the middleware and its KUKSA API."""
    loads = [LOADS[n] for n in args.apps if n in LOADS]
    if not loads:
        return
    print(
        f"\ndelivery at a paced load (1 ms tick): {'delivered/s':>12} {'asked':>6}"
        f" {'p50 ms':>8} {'p99 ms':>8} {'/msg':>6}"
    )
    for load in loads:
        asked = load.rate * load.apps
        print(f"{load}:")
        floor = await run_own(relay, load.apps, load.rate, load.size, args)
        row("bare relay", floor, asked)
        # With the KUKSA rows' catalog: both APIs write to the same typed signals, each
        # value checked, as a car's middleware runs (KUKSA needs the catalog).
        own = await run_own(the_middleware(args, vss), load.apps, load.rate, load.size, args)
        row("middleware (own API)", own, asked)
        kuksa = await run_kuksa(
            vss,
            load.apps,
            load.rate,
            args.seconds,
            batch_max=load.size,
            warmup=WARMUP,
            flags=tuple(journal_args(args)),
        )
        row("middleware (KUKSA v2 API)", kuksa, asked)
        if load.apps == 1:
            targets.add(
                f"1: {load}: delivered >= 0.99 x asked",
                f"{own.rate:,.0f}/s",
                f"asked {asked:,.0f}/s",
                own.rate / asked,
                own.rate >= 0.99 * asked,
            )
        else:
            # Not more than was asked: a relay behind at the end of its warm-up also
            # delivers that backlog in the measured window.
            due = min(floor.rate, asked)
            capped = f" (asked {asked:,.0f})" if due < floor.rate else ""
            targets.add(
                f"2: {load}: delivered >= 0.99 x relay",
                f"{own.rate:,.0f}/s",
                f"relay {floor.rate:,.0f}/s{capped}",
                ratio(own.rate, due),
                own.rate >= 0.99 * due,
            )
        targets.add(
            f"{1 if load.apps == 1 else 2}: {load}: p99 <= 2 x relay",
            f"{own.p99:.2f} ms",
            f"relay {floor.p99:.2f} ms",
            ratio(own.p99, floor.p99),
            at_most(own.p99, 2.0, floor.p99),
        )
        # Capped the same way: the own API's backlog of its warm-up is not a rate either.
        own_due = min(own.rate, asked)
        own_capped = f" (asked {asked:,.0f})" if own_due < own.rate else ""
        targets.add(
            f"3: KUKSA, {load}: delivered >= 0.95 x own API",
            f"{kuksa.rate:,.0f}/s",
            f"own {own.rate:,.0f}/s{own_capped}",
            ratio(kuksa.rate, own_due),
            kuksa.rate >= 0.95 * own_due,
        )
        targets.add(
            f"3: KUKSA, {load}: p99 <= 1.25 x own API",
            f"{kuksa.p99:.2f} ms",
            f"own {own.p99:.2f} ms",
            ratio(kuksa.p99, own.p99),
            at_most(kuksa.p99, 1.25, own.p99),
        )


async def cost(args: argparse.Namespace, targets: Targets) -> None:
    """Target 4a: the server's CPU seconds over the measured window, relay and middleware."""
    load = COST_LOAD
    print(f"\ncost per event, {load}: server CPU (utime + stime) over the measured window")
    figures = {}
    for name, server in (("bare relay", relay), ("middleware", the_middleware(args))):
        f = await run_own(server, load.apps, load.rate, load.size, args, cpu=True)
        figures[name] = f
        per_event = f.cpu_s / max(1.0, f.rate * args.seconds) * 1e6
        print(
            f"  {name:<12} {f.cpu_s:6.2f} CPU s in {args.seconds:g} s, {f.rate:,.0f} delivered/s,"
            f" {per_event:.1f} CPU us per delivered event; p99 {f.p99:.2f} ms",
            flush=True,
        )
    mine, floor = figures["middleware"], figures["bare relay"]
    targets.add(
        f"4a: {load}: CPU s <= 1.3 x relay",
        f"{mine.cpu_s:.2f} s",
        f"relay {floor.cpu_s:.2f} s",
        ratio(mine.cpu_s, floor.cpu_s),
        at_most(mine.cpu_s, 1.3, floor.cpu_s),
    )


async def throughput(args: argparse.Namespace, targets: Targets) -> None:
    """Target 4b: delivered events/s with the provider at full speed, beside the
    ceiling at 10 apps (the fastest of its three builds); the other app counts as
    information."""
    print(f"\nthroughput, provider as fast as it can (messages of {BATCH}):")
    print(f"  {'apps':>5} {'delivered/s':>12} {'/msg':>6} {'ceiling/s':>14} {'ratio':>6}")
    rates: dict[int, float] = {}
    for apps in sorted({*args.apps, THROUGHPUT_APPS}):
        f = await run_own(the_middleware(args), apps, 0, BATCH, args, latency=False)
        rates[apps] = f.rate
        line = f"  {apps:5d} {f.rate:12,.0f} {f.per_message:6.1f}"
        if apps == THROUGHPUT_APPS:
            ceilings = {
                build: await bare_rate(apps, BATCH, args.seconds, "--build", build)
                for build in ("add", "bytes")
            }
            with tempfile.TemporaryDirectory(prefix="vmw-ceiling-") as scratch:
                if compile_ceiling(Path(scratch)):
                    ceilings["bytes compiled"] = await bare_rate(
                        apps, BATCH, args.seconds, "--build", "bytes", "--compiled-from", scratch
                    )
            build, ceiling = max(ceilings.items(), key=lambda c: c[1])
            others = ", ".join(f"{b} {r:,.0f}/s" for b, r in ceilings.items())
            line += f" {ceiling:14,.0f} {ratio(f.rate, ceiling):6.2f}  (ceilings: {others})"
            targets.add(
                f"4b: {apps} apps at full speed: delivered >= 0.6 x ceiling",
                f"{f.rate:,.0f}/s",
                f"{build} {ceiling:,.0f}/s",
                ratio(f.rate, ceiling),
                f.rate >= 0.6 * ceiling,
            )
        print(line, flush=True)
    if 100 in rates:
        targets.add(
            "100 apps at full speed, per event >= 0.95 x 10 apps",
            f"{rates[100]:,.0f}/s",
            f"10 apps {rates[10]:,.0f}/s",
            ratio(rates[100], rates[10]),
            None,
        )


async def latency_rate(args: argparse.Namespace) -> None:
    """``--latency-rate R``: 1 app at R updates/s (messages of at most 64), relay and
    middleware, as information."""
    rate = args.latency_rate
    print(f"\n1 app at {rate:,.0f} updates/s (msgs of at most {BATCH}), information:")
    for name, server in (("bare relay", relay), ("middleware", the_middleware(args))):
        row(name, await run_own(server, 1, rate, BATCH, args), rate)


def compile_ceiling(directory: Path) -> bool:
    """Compile a copy of :mod:`bench.hand_bytes` with mypyc into ``directory`` (for
    ``bare_server --compiled-from``); False, saying why, where this machine cannot."""
    shutil.copy(Path(__file__).with_name("hand_bytes.py"), directory / "hand_bytes.py")
    try:
        # A session of its own: on a timeout the C compiler it started goes too.
        build = subprocess.Popen(
            [sys.executable, "-m", "mypyc", "hand_bytes.py"],
            cwd=directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as e:
        print(f"  (the compiled ceiling is not measured: {e})")
        return False
    try:
        output, _ = build.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()
        print("  (the compiled ceiling is not measured: mypyc took over 300 s)")
        return False
    if build.returncode != 0:
        errors = [line for line in output.splitlines() if "error" in line.lower()]
        why = (errors or output.strip().splitlines() or ["no output"])[-1]
        print(f"  (the compiled ceiling is not measured: mypyc failed: {why})")
        return False
    return True


async def bare_rate(apps: int, batch: int, seconds: float, *extra: str) -> float:
    """Events/s a bare ceiling server streams to ``apps`` apps in batches of ``batch``."""
    proc, address = spawn(
        "bench.bare_server", "--batch", str(batch), "--keys", str(len(KEYS)), *extra
    )
    try:
        _, rate = await measure(
            address,
            apps,
            provider_rate=None,
            seconds=seconds,
            latency=False,
            subscribe=False,
            warmup=WARMUP,
        )
    finally:
        stop(proc)
    return rate


async def compare_sync(args: argparse.Namespace) -> None:
    """The measurement behind choosing grpc.aio: the same bare streaming, aio vs threads."""
    print(f"\n{'apps':>5} {'aio bare/s':>12} {'sync bare/s':>12}")
    for apps in args.apps:
        rates = [await bare_rate(apps, 10, args.seconds, *extra) for extra in ((), ("--sync",))]
        print(f"{apps:5d} {rates[0]:12,.0f} {rates[1]:12,.0f}", flush=True)


JOURNAL_ORDER: Final = ("drops", "full", "full", "drops")
"""The journal comparison's windows: in ABBA order, so that a machine that
drifts (faster or slower over the half minute) biases neither level."""


async def journal_compare(args: argparse.Namespace, targets: Targets) -> None:
    """Target 5: delivered events/s at 4b's load, journal at ``drops`` and at ``full``;
    beside it, as information, the server's CPU time per delivered event at each
    level (from /proc over the measured window): the same cost seen as the car's
    CPU time, not as the rate the apps get."""
    rates: dict[str, list[float]] = {"drops": [], "full": []}
    cpu_us: dict[str, list[float]] = {"drops": [], "full": []}
    for level in JOURNAL_ORDER:
        directory = tempfile.mkdtemp(prefix="vmw-bench-journal-")
        _JOURNAL_DIRS.append(directory)

        def server(
            level: str = level, directory: str = directory
        ) -> tuple[subprocess.Popen[str], str]:
            return middleware("--journal-dir", directory, "--journal-level", level)

        f = await run_own(server, THROUGHPUT_APPS, 0, BATCH, args, latency=False, cpu=True)
        rates[level].append(f.rate)
        cpu_us[level].append(f.cpu_s / (f.rate * args.seconds) * 1e6 if f.rate else math.nan)
    drops, full = (sum(rates[k]) / len(rates[k]) for k in ("drops", "full"))
    cpu_drops, cpu_full = (sum(cpu_us[k]) / len(cpu_us[k]) for k in ("drops", "full"))
    print(
        f"\njournal, {THROUGHPUT_APPS} apps at full speed ({', '.join(JOURNAL_ORDER)}): drops "
        f"{' / '.join(f'{r:,.0f}' for r in rates['drops'])}/s, full "
        f"{' / '.join(f'{r:,.0f}' for r in rates['full'])}/s "
        f"(full costs {1 - ratio(full, drops):.0%} of the means); the server's CPU per "
        f"event: drops {' / '.join(f'{c:.2f}' for c in cpu_us['drops'])} us, full "
        f"{' / '.join(f'{c:.2f}' for c in cpu_us['full'])} us "
        f"(full {ratio(cpu_full, cpu_drops) - 1:+.0%})",
        flush=True,
    )
    targets.add(
        "5: journal full costs <= 20% of drops (delivered/s, means of 2 windows)",
        f"full {full:,.0f}/s",
        f"drops {drops:,.0f}/s",
        ratio(full, drops),
        full >= 0.8 * drops,
    )
    targets.add(
        "5: the server's CPU per delivered event, full / drops (means of 2 windows)",
        f"full {cpu_full:.2f} us",
        f"drops {cpu_drops:.2f} us",
        ratio(cpu_full, cpu_drops),
        None,
    )


async def stuck(args: argparse.Namespace, targets: Targets) -> None:
    """RSS of the middleware while one app never reads, another reads, at full speed."""
    mw, address = middleware()
    provider = None
    tasks: list[asyncio.Task[None]] = []
    try:
        await add_keys(address)
        tally = Tally(measuring=True)
        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(
                app_reader(
                    address,
                    "stuck",
                    Tally(),
                    subscribe=True,
                    latency=False,
                    ready=ready[0],
                    read=False,
                )
            ),
            asyncio.create_task(
                app_reader(address, "reader", tally, subscribe=True, latency=False, ready=ready[1])
            ),
        ]
        await started(ready, tasks)
        provider = await start_provider(address, 0, args.stuck_seconds)
        samples = []
        start = time.monotonic()
        while time.monotonic() - start < args.stuck_seconds:
            await asyncio.sleep(min(5.0, args.stuck_seconds / 6))
            samples.append(rss_kib(mw.pid))
        await provider.communicate()
    finally:
        await cancel(tasks)
        await ended(provider)
        stop(mw)
    # Flat: the second half's peak is less than 2 MiB above the first half's. The
    # samples move by a MiB or so either way (the allocator); a leak moves the peak.
    middle = len(samples) // 2
    growth = (max(samples[middle:]) - max(samples[:middle])) / 1024
    print(
        f"\nstuck app for {args.stuck_seconds:.0f} s, provider at full speed: middleware RSS "
        f"{samples[0] / 1024:.1f} MiB -> {samples[-1] / 1024:.1f} MiB "
        f"(samples {[round(x / 1024, 1) for x in samples]}); "
        f"the reading app received {tally.events:,} events",
        flush=True,
    )
    targets.add(
        f"6: memory flat, an app stuck {args.stuck_seconds:.0f} s at full speed (+ < 2 MiB)",
        f"{samples[0] / 1024:.1f} -> {samples[-1] / 1024:.1f} MiB, 2nd half's peak {growth:+.1f}",
        "2.0 MiB",
        growth / 2.0,
        growth < 2.0,
    )


async def lag(args: argparse.Namespace, targets: Targets) -> None:
    """The age of what an app reading one batch per second receives, under steady writes:
    its window is one batch, made when it acknowledges the previous one, of what its
    queue holds then (the latest values, the drop rule keeping them fresh)."""
    mw, address = middleware()
    tally = Tally()
    provider = None
    tasks: list[asyncio.Task[None]] = []
    try:
        await add_keys(address)
        ready = asyncio.Event()
        tasks = [
            asyncio.create_task(
                app_reader(
                    address,
                    "slow",
                    tally,
                    subscribe=True,
                    latency=True,
                    ready=ready,
                    pause_s=1.0,
                    window=LAG_WINDOW,
                    max_length=LAG_QUEUE,
                )
            )
        ]
        await started([ready], tasks)
        provider = await start_provider(address, 1000, args.lag_seconds + 2)
        await asyncio.sleep(2.0)  # the queues fill
        tally.measuring = True
        await asyncio.sleep(args.lag_seconds)
        tally.measuring = False
        await cancel(tasks)
        tally.settle()
        await provider.communicate()
    finally:
        await cancel(tasks)
        await ended(provider)
        stop(mw)
    oldest = max(tally.latencies_ns, default=0) / 1e9
    # One batch a second, made when the previous one was read: what the window (one
    # batch, a second of reading) and the reading itself take, plus the queue, which
    # holds one event per key at this rate (200 >= 100 keys), the newest of each.
    bound = (LAG_WINDOW + 1) * 1.0
    print(
        f"\nslow app (one batch per second, 1,000 writes/s): {tally.events:,} events received, "
        f"oldest {oldest:.2f} s old (bound {bound:.1f} s)",
        flush=True,
    )
    targets.add(
        "6: bounded lag: a slow app's oldest event <= its queue + window hold",
        f"oldest {oldest:.2f} s",
        f"bound {bound:.1f} s",
        oldest / bound,
        oldest <= bound,
    )


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}"


async def bench(args: argparse.Namespace) -> None:
    began, began_load = time.monotonic(), load_average()
    print(
        f"{os.cpu_count()} CPUs, load average (1 min) at the start {began_load}; "
        f"each window: a fresh server, {WARMUP:g} s warm-up, {args.seconds:g} s measured"
    )
    targets = Targets()
    with tempfile.TemporaryDirectory(prefix="vmw-bench-vss-") as tmp:
        vss = Path(tmp) / "bench-vss.json"
        catalog(vss)
        await delivery(args, targets, vss)
    await cost(args, targets)
    await throughput(args, targets)
    if args.latency_rate:
        await latency_rate(args)
    if args.journal_compare:
        await journal_compare(args, targets)
    if args.compare_sync:
        await compare_sync(args)
    if args.stuck_seconds:
        await stuck(args, targets)
    if args.lag_seconds:
        await lag(args, targets)
    targets.print()
    print(
        f"\nload average (1 min) at the start {began_load}, at the end {load_average()}; "
        f"{time.monotonic() - began:.0f} s in all"
    )


_JOURNAL_DIRS: list[str] = []


def journal_args(args: argparse.Namespace) -> list[str]:
    """Middleware flags for ``--journal LEVEL``: a fresh directory, removed at exit."""
    if not args.journal:
        return []
    directory = tempfile.mkdtemp(prefix="vmw-bench-journal-")
    _JOURNAL_DIRS.append(directory)
    return ["--journal-dir", directory, "--journal-level", args.journal]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.e2e",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="mode")
    prov = sub.add_parser("provider", help="(internal) the own API's provider process")
    prov.add_argument("--address", required=True)
    prov.add_argument("--rate", type=float, default=0, help="updates/s; 0: as fast as possible")
    prov.add_argument("--seconds", type=float, default=5)
    prov.add_argument("--batch-max", type=int, default=BATCH)
    parser.add_argument(
        "--apps",
        type=int,
        nargs="+",
        default=[1, 10, 100],
        help="app counts: the paced loads of targets 1-3 (1, 10, 100) and the full-speed "
        "throughput rows (10 always, for 4b)",
    )
    parser.add_argument(
        "--seconds", type=float, default=6.0, help="measured per window, after 2 s of warm-up"
    )
    parser.add_argument(
        "--latency-rate",
        type=float,
        default=0.0,
        help="also 1 app at this many updates/s, relay and middleware, as information",
    )
    parser.add_argument("--stuck-seconds", type=float, default=0.0)
    parser.add_argument("--lag-seconds", type=float, default=0.0)
    parser.add_argument(
        "--journal",
        choices=("lifecycle", "drops", "full"),
        default=None,
        help="run the middleware with its journal at this level (targets 1-4)",
    )
    parser.add_argument(
        "--journal-compare",
        action="store_true",
        help="also 10 apps at full speed with journal drops vs full (target 5)",
    )
    parser.add_argument(
        "--compare-sync",
        action="store_true",
        help="also stream the bare ceiling from a thread-pool server",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="run the middleware with the compiled cores (.venv-compiled: make compiled-venv)",
    )
    args = parser.parse_args(argv)
    if args.compiled:
        loads.SERVER_PYTHON["vehicle_middleware.server"] = os.path.join(
            ".venv-compiled", "bin", "python"
        )
    if args.mode == "provider":
        asyncio.run(provider_main(args.address, args.rate, args.seconds, args.batch_max))
    else:
        try:
            asyncio.run(bench(args))
        finally:
            for directory in _JOURNAL_DIRS:
                shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
