"""Several nodes: replicated writes against a single node, in one run.

Run: ``make bench-cluster`` (or ``python -m bench.cluster``). Every node is
a ``python -m vehicle_middleware.server serve`` process on loopback (bench.nodes); the
provider is bench.e2e's (batches of 64 over ``Publish``, ``time_ns`` its
clock at publish), the app bench.e2e's (one ``Events`` stream, ``ON_UPDATE``
on its 100 keys). It prints:

* throughput: delivered events/s with the provider publishing as fast as it
  can, provider and app on one node without peers, beside provider on node a
  and app on node c of three (max_confirms 0), and the ratio;
* latency at ``--latency-rate`` writes/s (default 1,000): provider-to-app
  p50/p99 on one node, then a to c, and what the cluster adds;
* catch-up: node c cut off by TCP relays (both ways) while the provider
  writes ``--partition-writes`` updates (default 100,000) on a over
  ``--partition-seconds`` (default 30 s); then healed: the time until c's
  digest equals a's, and what c's status says it received.

Smoke run (seconds, no figures to keep): ``python -m bench.cluster --seconds 1
--partition-seconds 2 --partition-writes 2000``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import grpc
from vehicle_middleware.contract.wire import APP_ID_HEADER
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

from bench.e2e import (
    KEYS,
    Tally,
    add_keys,
    app_reader,
    middleware,
    pct,
    start_provider,
    stop,
    timed_window,
)
from bench.nodes import Nodes, status
from bench.relay import Relay

NODE_FLAGS = ("--log-level", "WARNING", "--event-budget", "100000")


async def keys_reached(address: str, timeout: float = 30.0) -> None:
    """Wait until the benchmark's keys exist on the node at ``address``."""
    deadline = time.monotonic() + timeout
    async with grpc.aio.insecure_channel(address) as channel:
        stub = vstore_pb2_grpc.VStoreStub(channel)
        while True:
            reply = await stub.Get(
                vstore_pb2.GetRequest(names=KEYS), metadata=((APP_ID_HEADER, "bench-setup"),)
            )
            if not reply.not_found:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the keys did not reach {address}")
            await asyncio.sleep(0.05)


async def measure(
    provider_at: str, app_at: str, *, rate: float, seconds: float, latency: bool
) -> tuple[Tally, float]:
    """The provider on ``provider_at``, one app on ``app_at``; delivered/s and the tally."""
    await add_keys(provider_at)
    await keys_reached(app_at)
    tally = Tally()
    ready = asyncio.Event()
    reader = asyncio.create_task(
        app_reader(app_at, "bench-app", tally, subscribe=True, latency=latency, ready=ready)
    )
    await asyncio.wait_for(ready.wait(), 60)
    provider = await start_provider(provider_at, rate, seconds + 2.0)
    elapsed = await timed_window(tally, seconds)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await provider.communicate()
    return tally, tally.events / elapsed


async def single(args: argparse.Namespace, *, rate: float, latency: bool) -> tuple[Tally, float]:
    mw, address = middleware()
    try:
        return await measure(address, address, rate=rate, seconds=args.seconds, latency=latency)
    finally:
        stop(mw)


async def replicated(
    args: argparse.Namespace, directory: Path, *, rate: float, latency: bool
) -> tuple[Tally, float]:
    with Nodes(["a", "b", "c"], directory, *NODE_FLAGS) as nodes:
        return await measure(
            nodes["a"].address, nodes["c"].address, rate=rate, seconds=args.seconds, latency=latency
        )


async def throughput(args: argparse.Namespace, directory: Path) -> None:
    print("throughput, provider as fast as it can, one app (delivered events/s)")
    _, one = await single(args, rate=0, latency=False)
    _, three = await replicated(args, directory / "throughput", rate=0, latency=False)
    print(f"  one node (provider and app on it)      {one:12,.0f}")
    print(
        f"  three nodes (provider on a, app on c)  {three:12,.0f}   {three / one:.2f} of one node"
    )


async def latency(args: argparse.Namespace, directory: Path) -> None:
    rate = args.latency_rate
    print(f"\nlatency at {rate:,.0f} writes/s, provider to app (ms)")
    one, _ = await single(args, rate=rate, latency=True)
    three, _ = await replicated(args, directory / "latency", rate=rate, latency=True)
    rows = [("one node", one.latencies_ns), ("a to c", three.latencies_ns)]
    for what, values in rows:
        print(f"  {what:10} p50 {pct(values, 0.5):6.2f}   p99 {pct(values, 0.99):6.2f}")
    added50 = pct(three.latencies_ns, 0.5) - pct(one.latencies_ns, 0.5)
    added99 = pct(three.latencies_ns, 0.99) - pct(one.latencies_ns, 0.99)
    print(f"  added      p50 {added50:6.2f}   p99 {added99:6.2f}   (target p99 <= 5 ms)")


async def catch_up(args: argparse.Namespace, directory: Path) -> None:
    seconds, writes = args.partition_seconds, args.partition_writes
    print(f"\ncatch-up after a {seconds:g} s partition with {writes:,} writes on a")
    relays = {pair: Relay() for pair in (("a", "c"), ("b", "c"), ("c", "a"), ("c", "b"))}
    for relay in relays.values():
        await relay.start()
    routes = {pair: relay.address for pair, relay in relays.items()}
    try:
        with Nodes(["a", "b", "c"], directory / "partition", *NODE_FLAGS, routes=routes) as nodes:
            for (_, to), relay in relays.items():
                relay.target = ("127.0.0.1", nodes.ports[to])
            await add_keys(nodes["a"].address)
            await keys_reached(nodes["c"].address)
            before = (await status(nodes["c"].address)).applied
            for relay in relays.values():
                relay.close()
            provider = await start_provider(nodes["a"].address, writes / seconds, seconds)
            out, _ = await provider.communicate()
            published = out.decode().strip()
            a = await status(nodes["a"].address)
            for relay in relays.values():
                relay.open()
            healed = time.perf_counter()
            while True:
                c = await status(nodes["c"].address)
                if c.digest == a.digest:
                    break
                if time.perf_counter() - healed > 600:
                    raise RuntimeError("c did not catch up in 10 minutes")
                await asyncio.sleep(0.01)
            took = time.perf_counter() - healed
            print(f"  a {published}; a's digest reached c in {took:.2f} s")
            print(
                f"  c applied {c.applied - before:,} events of a meanwhile "
                f"(a retains {a.retained:,} events, {a.retained_bytes:,} bytes)"
            )
    finally:
        for relay in relays.values():
            await relay.stop()


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="vmw-bench-cluster-") as tmp:
        directory = Path(tmp)
        for sub in ("throughput", "latency", "partition"):
            (directory / sub).mkdir()
        await throughput(args, directory)
        await latency(args, directory)
        if args.partition_seconds > 0:
            await catch_up(args, directory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="each measured window")
    parser.add_argument("--latency-rate", type=float, default=1_000)
    parser.add_argument("--partition-seconds", type=float, default=30.0, help="0: skip")
    parser.add_argument("--partition-writes", type=int, default=100_000)
    args = parser.parse_args(argv)
    asyncio.run(bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
