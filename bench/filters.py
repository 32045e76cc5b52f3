"""Benchmark of subscription filters: their cost in the ESS core, and what an app gets.

Run: ``make bench-filters`` (or ``python -m bench.filters``; ``--seconds`` and
``--rounds`` shorten it for a smoke run).

(a) The core, in one process (a V-Store and the ESS, no gRPC): ns per write of a
    key one app subscribes to, for each kind of subscription, each figure beside
    the unfiltered one of the same run:

    * ``unfiltered``: every write an event, drained as it comes (no drop);
    * ``interval held``: a 100 ms interval on a clock that does not move: every
      write after the first is held (the gate's common case at a high rate);
    * ``threshold skipped``: values that never move by the threshold: every
      write counted and skipped (the value read as a number each time);
    * ``drop rule``: unfiltered into a full queue: every write evicts the key's
      oldest event (what a filter saves a slow app).

(b) Through a real server on 127.0.0.1: a provider writes one key at 1 kHz
    (by the clock: a late pass catches up) for ``--seconds``; one app
    subscribes with a 100 ms interval and another without a filter, side by
    side: events delivered per second, and writes per event (every write is in
    one event: the sum is checked).

Each core figure is the fastest of several repeats (slower ones measure the
machine's other work). Figures are of this machine; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

from vehicle_middleware.contract.values import encode
from vehicle_middleware.ess import EventSubSystem, Filter, QueueConfig, SubscriptionRequest
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, Sub
from vehicle_middleware.sdk import Filter as SdkFilter
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.filter_numbers import ValueNumbers
from vehicle_middleware.server.server import start_server
from vehicle_middleware.vstore import VStore

KEY = "Vehicle.Speed"
BATCH = 100
"""Writes per timed batch (drained after each: fits a queue of 200)."""
_MS = 1_000_000
WRITE_HZ = 1000.0
"""(b): the writes per second of the one key (a 1 kHz signal)."""


def _core(flt: Filter | None, *, full: bool, values: list[bytes]) -> Callable[[], float]:
    """A store and an ESS with one app subscribed to KEY as asked; returns a batch
    runner: ``BATCH`` writes of ``values`` in turn, then a drain, in seconds."""
    store = VStore()
    ess = EventSubSystem(store, numbers=ValueNumbers(None), clock=lambda: 0)
    store.set_listener(ess)
    store.add_key(KEY)
    store.set(KEY, values[0])
    ess.open_stream("app", [QueueConfig(0, 0, 1 if full else 200)])
    [r] = ess.register("app", [SubscriptionRequest(KEY, filter=flt)])
    assert r.status.name == "OK", r.detail
    key = store.id_of(KEY)
    assert key is not None
    n = len(values)

    def batch() -> float:
        set_ = store.set
        t0 = time.perf_counter()
        for i in range(BATCH):
            set_(key, values[i % n])
        elapsed = time.perf_counter() - t0
        if not full:
            ess.drain("app", 1000)
        return elapsed

    return batch


def core(repeats: int, rounds: int) -> dict[str, float]:
    """ns per write of each scenario of (a)."""
    moving = [encode(float(i)) for i in range(16)]
    still = [encode(10.0 + i / 1000) for i in range(16)]
    scenarios = {
        "unfiltered": _core(None, full=False, values=moving),
        "interval held": _core(Filter(min_interval_ns=100 * _MS), full=False, values=moving),
        "threshold skipped": _core(Filter(threshold=1.0), full=False, values=still),
        "drop rule": _core(None, full=True, values=moving),
    }
    best: dict[str, float] = {}
    for _ in range(repeats):
        for name, run in scenarios.items():  # interleaved: a slow phase hits them all
            ns = sum(run() for _ in range(rounds)) / (rounds * BATCH) * 1e9
            best[name] = min(best.get(name, ns), ns)
    return best


async def served(seconds: float) -> tuple[int, int, int, int]:
    """(b): writes, filtered events and their writes, unfiltered events."""
    running = await start_server(replace_settings(Settings(), listen="127.0.0.1:0"))
    filtered: list[DataEvent] = []
    plain: list[DataEvent] = []

    async def read(app: AppClient, into: list[DataEvent]) -> None:
        async for e in app.events():
            if isinstance(e, DataEvent):
                into.append(e)

    try:
        async with (
            ProviderClient(running.address, "sim") as provider,
            AppClient(running.address, "sampled") as sampled,
            AppClient(running.address, "every") as every,
        ):
            await provider.add_keys([KEY])
            await provider.flush()
            await sampled.subscribe([Sub(KEY, filter=SdkFilter(min_interval=0.1))])
            await every.subscribe([Sub(KEY)])
            readers = [
                asyncio.create_task(read(sampled, filtered)),
                asyncio.create_task(read(every, plain)),
            ]
            # 1 kHz by the clock: each pass writes what is due by now, one write a
            # publish, so a late pass catches up rather than lowering the rate.
            n = 0
            began = time.monotonic()
            while (elapsed := time.monotonic() - began) < seconds:
                due = int(elapsed * WRITE_HZ) + 1
                while n < due:
                    n += 1
                    await provider.publish({KEY: encode(float(n))})
                await asyncio.sleep(max(0.0, n / WRITE_HZ - (time.monotonic() - began)))
            await provider.flush()
            deadline = time.monotonic() + 5
            while sum(e.writes for e in filtered) < n or len(plain) < n:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.01)
            for task in readers:
                task.cancel()
    finally:
        await running.stop(0)
    return n, len(filtered), sum(e.writes for e in filtered), len(plain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.filters", description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=100, help="batches of 100 writes")
    parser.add_argument("--seconds", type=float, default=5.0, help="(b): how long to write")
    args = parser.parse_args(argv)

    best = core(args.repeats, args.rounds)
    base = best["unfiltered"]
    print("(a) the ESS core, ns per write of a key one app subscribes to")
    print(f"  {'scenario':<20}{'ns/write':>10}  {'x unfiltered':>12}")
    for name, ns in best.items():
        print(f"  {name:<20}{ns:>10.0f}  {ns / base:>12.2f}")

    n, events, writes, plain = asyncio.run(served(args.seconds))
    s = args.seconds
    print(f"(b) a real server: {n} writes in {s:g} s ({n / s:.0f}/s) to one key")
    print(f"  {'app':<24}{'events/s':>10}  {'writes/event':>12}")
    print(f"  {'100 ms interval':<24}{events / s:>10.1f}  {writes / max(events, 1):>12.1f}")
    print(f"  {'no filter':<24}{plain / s:>10.1f}  {1.0:>12.1f}")
    if writes != n:
        print(f"  the filtered app's events stand for {writes} writes, not {n}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
