"""End-to-end benchmark: providers -> middleware -> N apps over gRPC on loopback.

Run: ``make bench-e2e`` (or ``python -m bench.e2e``). Three processes share the
machine's two cores: the middleware (or the bare ceiling server), one provider
publishing over ``Publish``, and the apps (one gRPC channel each).

It prints, for N = 1, 10 and 100 apps:

* throughput: delivered events/s with the provider publishing as fast as it can,
  beside the ceiling measured in the same run: a bare grpc.aio server streaming
  the same messages in batches of the same size to the same app code, with no
  V-Store or ESS work (``bench.bare_server``); and the ratio;
* latency: provider-to-app p50/p99 (receive time minus the event's ``time_ns``,
  which is the provider's clock at publish) at 10,000 updates/s;

and, with ``--stuck-seconds S``, the middleware's RSS while one app reads
nothing for S seconds (bounded queues: it must stay flat).
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

import grpc

from vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

KEYS = [f"Vehicle.Bench.Signal{i}" for i in range(50)]


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
                # A provider sampling at 1 kHz: what is due each millisecond goes as one batch.
                tick += 0.001
                await asyncio.sleep(max(0.0, tick - time.perf_counter()))
                due = min(batch_max, int(rate * (time.perf_counter() - start)) - sent)
                if due <= 0:
                    continue
            else:
                due = batch_max
            now = time.time_ns()
            updates = []
            for _ in range(due):
                n += 1
                updates.append(
                    vstore_pb2.IdUpdate(
                        id=ids[n % len(ids)], data=n.to_bytes(8, "little"), time_ns=now
                    )
                )
            await call.write(vstore_pb2.PublishRequest(updates=updates))
            sent += due
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


async def app_reader(
    address: str,
    name: str,
    tally: Tally,
    *,
    subscribe: bool,
    latency: bool,
    ready: asyncio.Event,
    read: bool = True,
) -> None:
    md = (("app-id", name),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = ess_pb2_grpc.EventServiceStub(channel)
        call = stub.GetEvents(
            ess_pb2.GetEventsRequest(
                queues=[ess_pb2.QueueConfig(queue=0, min_length=50, max_length=200)]
            ),
            metadata=md,
        )
        await call.read()
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
        while True:
            batch = await call.read()
            if batch is grpc.aio.EOF:
                return
            if not tally.measuring:
                continue
            events = batch.events
            tally.batches += 1
            tally.events += len(events)
            if latency:
                # The oldest event of the batch stands for all of it (a pessimistic
                # figure that keeps this process's per-event work out of the result).
                oldest = now = time.time_ns()
                for e in (events[0], events[-1]):
                    oldest = min(oldest, e.data_updated.time_ns)
                tally.latencies_ns.extend([now - oldest] * len(events))


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
        provider = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.e2e",
            "provider",
            "--address",
            address,
            "--rate",
            str(provider_rate),
            "--seconds",
            str(seconds + 2.0),
            stdout=asyncio.subprocess.PIPE,
        )
    await asyncio.sleep(1.0)  # warm-up, not measured
    tally.measuring = True
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    tally.measuring = False
    elapsed = time.perf_counter() - t0
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if provider is not None:
        await provider.communicate()
    return tally, tally.events / elapsed


async def add_keys(address: str) -> None:
    """The benchmark's keys, added before any app subscribes."""
    async with grpc.aio.insecure_channel(address) as channel:
        await vstore_pb2_grpc.VStoreStub(channel).AddKeys(
            vstore_pb2.AddKeysRequest(names=KEYS), metadata=(("app-id", "bench-setup"),)
        )


def pct(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


async def bench(args: argparse.Namespace) -> None:
    print(
        f"{'apps':>5} {'delivered/s':>12} {'ceiling/s':>12} {'ratio':>6} {'batch':>6}"
        f"   latency @{args.latency_rate:,.0f} updates/s: delivered/s, p50 / p99 ms"
    )
    for apps in args.apps:
        mw, address = spawn(
            "middleware",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "WARNING",
            "--event-budget",
            "100000",
            *journal_args(args),
        )
        try:
            tally, rate = await measure(
                address, apps, provider_rate=0, seconds=args.seconds, latency=False, subscribe=True
            )
            batch = tally.events / max(1, tally.batches)
            lat, lat_rate = await measure(
                address,
                apps,
                provider_rate=args.latency_rate,
                seconds=args.seconds,
                latency=True,
                subscribe=True,
            )
        finally:
            stop(mw)
        ceiling = await bare_rate(apps, max(1, round(batch)), args.seconds)
        print(
            f"{apps:5d} {rate:12,.0f} {ceiling:12,.0f} {rate / ceiling:6.2f} {batch:6.1f}"
            f"   {lat_rate:10,.0f}  {pct(lat.latencies_ns, 0.5):.2f} / "
            f"{pct(lat.latencies_ns, 0.99):.2f}",
            flush=True,
        )
    if args.compare_sync:
        await compare_sync(args)
    if args.stuck_seconds:
        await stuck(args)


async def bare_rate(apps: int, batch: int, seconds: float, *extra: str) -> float:
    """Events/s the bare ceiling server streams to ``apps`` apps in batches of ``batch``."""
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
    print(f"{'apps':>5} {'aio bare/s':>12} {'sync bare/s':>12}")
    for apps in args.apps:
        rates = [await bare_rate(apps, 10, args.seconds, *extra) for extra in ((), ("--sync",))]
        print(f"{apps:5d} {rates[0]:12,.0f} {rates[1]:12,.0f}", flush=True)


async def stuck(args: argparse.Namespace) -> None:
    """RSS of the middleware while one app never reads and another keeps up."""
    mw, address = spawn("middleware", "serve", "--listen", "127.0.0.1:0", "--log-level", "WARNING")
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
        provider = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.e2e",
            "provider",
            "--address",
            address,
            "--rate",
            "10000",
            "--seconds",
            str(args.stuck_seconds),
            stdout=asyncio.subprocess.PIPE,
        )
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
    print(
        f"stuck app for {args.stuck_seconds:.0f} s at 10,000 updates/s: middleware RSS "
        f"{samples[0] / 1024:.1f} MiB -> {samples[-1] / 1024:.1f} MiB "
        f"(max {max(samples) / 1024:.1f}; samples {[round(s / 1024, 1) for s in samples]}); "
        f"the reading app received {tally.events:,} events"
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    prov = sub.add_parser("provider", help="(internal) the provider process")
    prov.add_argument("--address", required=True)
    prov.add_argument("--rate", type=float, default=0, help="updates/s; 0: as fast as possible")
    prov.add_argument("--seconds", type=float, default=5)
    prov.add_argument("--batch-max", type=int, default=100)
    parser.add_argument("--apps", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--latency-rate", type=float, default=10_000)
    parser.add_argument("--stuck-seconds", type=float, default=0.0)
    parser.add_argument(
        "--journal",
        choices=("lifecycle", "drops", "full"),
        default=None,
        help="run the middleware with its journal at this level",
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
