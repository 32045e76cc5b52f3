"""End-to-end benchmark: providers -> middleware -> N apps over gRPC on loopback.

Run: ``make bench-e2e`` (or ``python -m bench.e2e``). Three processes share the
machine's two cores: the middleware (or a bare ceiling server), one provider
publishing batches of 64 over ``Publish``, and the apps (one gRPC channel each,
all in this process, subscribed ``ON_UPDATE`` to the same 100 keys).

It prints, beside figures measured in the same run:

* throughput: delivered events/s with the provider publishing as fast as it
  can, beside two ceilings (``bench.bare_server``): the strongest bare grpc.aio
  server building the same messages fresh (``events.add()`` and field
  assignment, full batches of 64) and the raw limit (the same streams writing
  one prebuilt serialized batch again and again); the ratio to each;
* latency: provider-to-app p50/p99 per event (receive time minus the event's
  ``time_ns``, the provider's clock at publish) at 10,000 updates/s, and at the
  KUKSA databroker's published load (one subscriber, 100 signals, 84,000
  updates/s);
* with ``--journal-compare``: throughput with the journal at ``drops`` and at
  ``full``, two windows each in the order drops, full, full, drops;
* with ``--stuck-seconds S``: the middleware's RSS while one app reads nothing
  for S seconds and the provider publishes as fast as it can;
* with ``--lag-seconds S``: the age of what an app that reads one batch per
  second receives while a provider writes steadily;

and a last table of the issue-19 targets, each met or not met.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Final

import grpc
from vmw.proto.ess.v1 import ess_pb2, ess_pb2_grpc
from vmw.proto.vstore.v1 import vstore_pb2, vstore_pb2_grpc

KEYS = [f"Vehicle.Bench.Signal{i}" for i in range(100)]
BATCH = 64  # the provider's batches, and the ceilings'
LAG_QUEUE, LAG_WINDOW = 200, 1  # the slow app's queue (events) and window (batches)
KUKSA_RATE = 84_000  # the KUKSA databroker's published load: 1 provider, 1 subscriber


# -- processes ---------------------------------------------------------------------


def spawn(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m ARGS``; return it and the address from its 'listening on' line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"{args[0]} did not start: {line!r}")
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# -- the provider (its own process) --------------------------------------------------


async def provider_main(address: str, rate: float, seconds: float, batch_max: int) -> None:
    md = (("app-id", "bench-provider"),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = vstore_pb2_grpc.VStoreStub(channel)
        reply = await stub.AddKeys(vstore_pb2.AddKeysRequest(names=KEYS), metadata=md)
        ids = [k.id for k in reply.keys]
        call = stub.Publish(metadata=md)
        sent = 0
        start = time.perf_counter()
        n = 0
        tick = start
        while time.perf_counter() - start < seconds:
            if rate > 0:
                # A provider sampling at 1 kHz: what is due each millisecond goes at once,
                # in messages of at most batch_max updates.
                tick += 0.001
                await asyncio.sleep(max(0.0, tick - time.perf_counter()))
                due = int(rate * (time.perf_counter() - start)) - sent
                if due <= 0:
                    continue
            else:
                due = batch_max
            now = time.time_ns()
            while due > 0:
                size = min(due, batch_max)
                updates = []
                for _ in range(size):
                    n += 1
                    updates.append(
                        vstore_pb2.IdUpdate(
                            id=ids[n % len(ids)], data=n.to_bytes(8, "little"), time_ns=now
                        )
                    )
                await call.write(vstore_pb2.PublishRequest(updates=updates))
                sent += size
                due -= size
        await call.done_writing()
        summary = await call
        print(f"published {summary.updates}", flush=True)


# -- the apps (the benchmark's own process) -------------------------------------------


@dataclass
class Tally:
    measuring: bool = False
    events: int = 0
    batches: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    """Per event: receive time minus the event's time_ns."""


async def app_reader(
    address: str,
    name: str,
    tally: Tally,
    *,
    subscribe: bool,
    latency: bool,
    ready: asyncio.Event,
    read: bool = True,
    pause_s: float = 0.0,
    window: int = 0,
    max_length: int = 200,
) -> None:
    """One app on the ``Events`` stream: acknowledges the batches it read every half
    window (as the SDK does), ``window`` 0 taking the middleware's default."""
    md = (("app-id", name),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = ess_pb2_grpc.EventServiceStub(channel)
        call = stub.Events(metadata=md)
        queue = ess_pb2.QueueConfig(queue=0, min_length=min(50, max_length), max_length=max_length)
        await call.write(
            ess_pb2.EventsRequest(open=ess_pb2.OpenEvents(queues=[queue], window=window))
        )
        started = await call.read()
        ack_every = max(1, started.events[0].started.window // 2)
        unacked = 0
        if subscribe:
            await stub.Register(
                ess_pb2.RegisterRequest(
                    subscriptions=[
                        ess_pb2.Subscription(key=k, trigger=ess_pb2.TRIGGER_ON_UPDATE) for k in KEYS
                    ]
                ),
                metadata=md,
            )
        ready.set()
        if not read:
            await asyncio.Event().wait()  # a stuck app: never reads again
        record = tally.latencies_ns.append
        while True:
            if unacked >= ack_every:
                await call.write(ess_pb2.EventsRequest(read=unacked))
                unacked = 0
            batch = await call.read()
            if batch is grpc.aio.EOF:
                return
            unacked += 1
            if pause_s:
                await asyncio.sleep(pause_s)  # a slow app: one batch per pause
            if not tally.measuring:
                continue
            events = batch.events
            tally.batches += 1
            tally.events += len(events)
            if latency:
                now = time.time_ns()
                for e in events:
                    record(now - e.data_updated.time_ns)


async def measure(
    address: str,
    apps: int,
    *,
    provider_rate: float | None,
    seconds: float,
    latency: bool,
    subscribe: bool,
) -> tuple[Tally, float]:
    tally = Tally()
    if subscribe:  # the keys must exist before the apps subscribe to them
        await add_keys(address)
    readies = [asyncio.Event() for _ in range(apps)]
    tasks = [
        asyncio.create_task(
            app_reader(
                address,
                f"bench-app-{i}",
                tally,
                subscribe=subscribe,
                latency=latency,
                ready=readies[i],
            )
        )
        for i in range(apps)
    ]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    provider = None
    if provider_rate is not None:
        provider = await start_provider(address, provider_rate, seconds + 2.0)
    elapsed = await timed_window(tally, seconds)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if provider is not None:
        await provider.communicate()
    return tally, tally.events / elapsed


async def timed_window(tally: Tally, seconds: float) -> float:
    """1 s of warm-up, then count into ``tally`` for ``seconds``; the seconds measured."""
    await asyncio.sleep(1.0)  # warm-up, not measured
    tally.measuring = True
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    tally.measuring = False
    return time.perf_counter() - t0


async def start_provider(address: str, rate: float, seconds: float) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.e2e",
        "provider",
        "--address",
        address,
        "--rate",
        str(rate),
        "--seconds",
        str(seconds),
        "--batch-max",
        str(BATCH),
        stdout=asyncio.subprocess.PIPE,
    )


async def add_keys(address: str) -> None:
    """The benchmark's keys, added before any app subscribes."""
    async with grpc.aio.insecure_channel(address) as channel:
        await vstore_pb2_grpc.VStoreStub(channel).AddKeys(
            vstore_pb2.AddKeysRequest(names=KEYS), metadata=(("app-id", "bench-setup"),)
        )


def pct(values: list[int], q: float) -> float:
    """The ``q`` quantile of ``values`` (ns), in ms."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


def middleware(*extra: str) -> tuple[subprocess.Popen[str], str]:
    return spawn(
        "vmw.server",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--log-level",
        "WARNING",
        "--event-budget",
        "100000",
        *extra,
    )


@dataclass
class Targets:
    """Each delivery target beside its figure: (what, figure, met)."""

    rows: list[tuple[str, str, bool]] = field(default_factory=list)

    def add(self, what: str, figure: str, met: bool) -> None:
        self.rows.append((what, figure, met))

    def print(self) -> None:
        print("\ntargets")
        for what, figure, met in self.rows:
            print(f"  {'met    ' if met else 'NOT MET'}  {what}: {figure}")


async def throughput(args: argparse.Namespace, targets: Targets) -> None:
    print(
        f"{'apps':>5} {'delivered/s':>12} {'batch':>6} {'add ceiling/s':>14} {'ratio':>6}"
        f" {'raw limit/s':>12} {'ratio':>6}"
    )
    per_event: dict[int, float] = {}
    for apps in args.apps:
        mw, address = middleware(*journal_args(args))
        try:
            tally, rate = await measure(
                address, apps, provider_rate=0, seconds=args.seconds, latency=False, subscribe=True
            )
        finally:
            stop(mw)
        batch = tally.events / max(1, tally.batches)
        add = await bare_rate(apps, BATCH, args.seconds, "--build", "add")
        raw = await bare_rate(apps, BATCH, args.seconds, "--build", "raw")
        per_event[apps] = rate
        print(
            f"{apps:5d} {rate:12,.0f} {batch:6.1f} {add:14,.0f} {rate / add:6.2f}"
            f" {raw:12,.0f} {rate / raw:6.2f}",
            flush=True,
        )
        if apps == 10:
            targets.add(
                "10 apps: delivered >= 50% of the strongest ceiling (events.add())",
                f"{rate:,.0f}/s = {rate / add:.2f} x {add:,.0f}/s (raw limit {raw:,.0f}/s)",
                rate >= 0.5 * add,
            )
    if 10 in per_event and 100 in per_event:
        targets.add(
            "100 apps no worse per event than 10",
            f"{per_event[100]:,.0f}/s against {per_event[10]:,.0f}/s",
            per_event[100] >= 0.95 * per_event[10],
        )


async def latency(args: argparse.Namespace, targets: Targets) -> None:
    """Per-event latency at a steady rate, beside the floor: the same provider and
    apps through ``bench.bare_server --build relay`` (a bare fan-out, nothing else)."""
    print("\nlatency per event, provider to app (p50 / p99 ms), beside the bare relay's")
    runs = [(1, args.latency_rate, 1.0), (10, args.latency_rate, 2.0), (1, KUKSA_RATE, 1.2)]
    for apps, rate, ceiling_ms in runs:
        if apps not in args.apps and apps != 1:
            continue
        figures = {}
        for name, start in (
            ("relay", lambda: spawn("bench.bare_server", "--build", "relay", "--batch", "500")),
            ("middleware", lambda: middleware(*journal_args(args))),
        ):
            proc, address = start()
            try:
                lat, delivered = await measure(
                    address,
                    apps,
                    provider_rate=rate,
                    seconds=args.seconds,
                    latency=True,
                    subscribe=True,
                )
            finally:
                stop(proc)
            figures[name] = (pct(lat.latencies_ns, 0.5), pct(lat.latencies_ns, 0.99), delivered)
        p50, p99, delivered = figures["middleware"]
        f50, f99, fdelivered = figures["relay"]
        asked = rate * apps
        print(
            f"{apps:5d} app(s) at {rate:,.0f} updates/s: {delivered:,.0f} of {asked:,.0f} "
            f"deliveries/s, p50 {p50:.2f} / p99 {p99:.2f} ms; bare relay {fdelivered:,.0f}/s, "
            f"p50 {f50:.2f} / p99 {f99:.2f} ms",
            flush=True,
        )
        targets.add(
            f"p99 <= {ceiling_ms} ms, {apps} app(s) at {rate:,.0f} updates/s",
            f"p50 {p50:.2f} / p99 {p99:.2f} ms, {delivered / asked:.0%} delivered "
            f"(bare relay: p99 {f99:.2f} ms, {fdelivered / asked:.0%})",
            p99 <= ceiling_ms and delivered >= 0.98 * asked,
        )


async def bare_rate(apps: int, batch: int, seconds: float, *extra: str) -> float:
    """Events/s a bare ceiling server streams to ``apps`` apps in batches of ``batch``."""
    proc, address = spawn(
        "bench.bare_server", "--batch", str(batch), "--keys", str(len(KEYS)), *extra
    )
    try:
        _, rate = await measure(
            address, apps, provider_rate=None, seconds=seconds, latency=False, subscribe=False
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
    """Delivered events/s with 10 apps, journal at ``drops`` and at ``full``, same run."""
    rates: dict[str, list[float]] = {"drops": [], "full": []}
    for level in JOURNAL_ORDER:
        directory = tempfile.mkdtemp(prefix="vmw-bench-journal-")
        _JOURNAL_DIRS.append(directory)
        mw, address = middleware("--journal-dir", directory, "--journal-level", level)
        try:
            _, rate = await measure(
                address, 10, provider_rate=0, seconds=args.seconds, latency=False, subscribe=True
            )
        finally:
            stop(mw)
        rates[level].append(rate)
    drops, full = (sum(rates[k]) / len(rates[k]) for k in ("drops", "full"))
    cost = 1 - full / drops
    print(
        f"\njournal, 10 apps ({', '.join(JOURNAL_ORDER)}): drops "
        f"{' / '.join(f'{r:,.0f}' for r in rates['drops'])}/s, full "
        f"{' / '.join(f'{r:,.0f}' for r in rates['full'])}/s (full costs {cost:.0%} of the means)",
        flush=True,
    )
    targets.add(
        "journal full costs <= 20% of drops",
        f"{full:,.0f} against {drops:,.0f}/s (means of 2 windows each): {cost:.0%}",
        cost <= 0.20,
    )


async def stuck(args: argparse.Namespace, targets: Targets) -> None:
    """RSS of the middleware while one app never reads, another reads, at full speed."""
    mw, address = middleware()
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
        await asyncio.gather(ready[0].wait(), ready[1].wait())
        provider = await start_provider(address, 0, args.stuck_seconds)
        samples = []
        start = time.monotonic()
        while time.monotonic() - start < args.stuck_seconds:
            await asyncio.sleep(min(5.0, args.stuck_seconds / 6))
            samples.append(rss_kib(mw.pid))
        await provider.communicate()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        stop(mw)
    # Flat: the second half of the run grows by less than 2 MiB (allocator noise).
    half = samples[len(samples) // 2 :]
    growth = (max(half) - half[0]) / 1024
    print(
        f"\nstuck app for {args.stuck_seconds:.0f} s, provider at full speed: middleware RSS "
        f"{samples[0] / 1024:.1f} MiB -> {samples[-1] / 1024:.1f} MiB "
        f"(samples {[round(x / 1024, 1) for x in samples]}); "
        f"the reading app received {tally.events:,} events",
        flush=True,
    )
    targets.add(
        f"memory flat with a stuck app for {args.stuck_seconds:.0f} s at full speed",
        f"{samples[0] / 1024:.1f} -> {samples[-1] / 1024:.1f} MiB, second half +{growth:.1f} MiB",
        growth < 2.0,
    )


async def lag(args: argparse.Namespace, targets: Targets) -> None:
    """The age of what an app reading one batch per second receives, under steady writes:
    its window is one batch, made when it acknowledges the previous one, of what its
    queue holds then (the latest values, the drop rule keeping them fresh)."""
    mw, address = middleware()
    tally = Tally()
    try:
        await add_keys(address)
        ready = asyncio.Event()
        task = asyncio.create_task(
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
        await ready.wait()
        provider = await start_provider(address, 1000, args.lag_seconds + 2)
        await asyncio.sleep(2.0)  # the queues fill
        tally.measuring = True
        await asyncio.sleep(args.lag_seconds)
        tally.measuring = False
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await provider.communicate()
    finally:
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
        "bounded lag: a slow app never receives events older than its queue + window hold",
        f"oldest {oldest:.2f} s against {bound:.1f} s",
        oldest <= bound,
    )


async def bench(args: argparse.Namespace) -> None:
    targets = Targets()
    await throughput(args, targets)
    await latency(args, targets)
    if args.journal_compare:
        await journal_compare(args, targets)
    if args.compare_sync:
        await compare_sync(args)
    if args.stuck_seconds:
        await stuck(args, targets)
    if args.lag_seconds:
        await lag(args, targets)
    targets.print()


_JOURNAL_DIRS: list[str] = []


def journal_args(args: argparse.Namespace) -> list[str]:
    """Middleware flags for ``--journal LEVEL``: a fresh directory, removed at exit."""
    if not args.journal:
        return []
    directory = tempfile.mkdtemp(prefix="vmw-bench-journal-")
    _JOURNAL_DIRS.append(directory)
    return ["--journal-dir", directory, "--journal-level", args.journal]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    prov = sub.add_parser("provider", help="(internal) the provider process")
    prov.add_argument("--address", required=True)
    prov.add_argument("--rate", type=float, default=0, help="updates/s; 0: as fast as possible")
    prov.add_argument("--seconds", type=float, default=5)
    prov.add_argument("--batch-max", type=int, default=BATCH)
    parser.add_argument("--apps", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--latency-rate", type=float, default=10_000)
    parser.add_argument("--stuck-seconds", type=float, default=0.0)
    parser.add_argument("--lag-seconds", type=float, default=0.0)
    parser.add_argument(
        "--journal",
        choices=("lifecycle", "drops", "full"),
        default=None,
        help="run the middleware with its journal at this level",
    )
    parser.add_argument(
        "--journal-compare", action="store_true", help="also 10 apps with journal drops vs full"
    )
    parser.add_argument(
        "--compare-sync",
        action="store_true",
        help="also stream the bare ceiling from a thread-pool server",
    )
    args = parser.parse_args(argv)
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
