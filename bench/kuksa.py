"""KUKSA-style load test: the KUKSA v2 API beside the project's own, in one run.

Run: ``make bench-kuksa`` (or ``python -m bench.kuksa``), about 80 s.
The shape of the KUKSA databroker's published figures (``databroker-perf``:
one provider, one subscriber, about 100 signals): 100 ``float`` sensors
from a VSS catalog (``serve --vss``), one provider process, subscribers in
this process, a fresh middleware per measurement.

* KUKSA: the provider opens a v2 ``OpenProviderStream`` and publishes
  ``PublishValuesRequest``s by signal id (at most 64 signals per message,
  each with its timestamp; at a fixed rate, what is due on each 1 ms tick,
  as the own API's provider does), reading the ``PublishValuesResponse``s as they
  come; subscribers call v2 ``Subscribe`` on the 100 paths (``buffer_size``
  200).
Rows: one subscriber with the provider at full speed, at 10,000 signals/s
and at the databroker's published rate (83,935/s); ten subscribers at full
speed. At full speed the provider outruns delivery, so latency there is
queueing (transport buffers and the subscription queues, which drop the
oldest of a key), not the path's own delay.

* Own API: the provider of ``bench.e2e`` (``Publish``, batches of at most 64,
  ``float`` values), apps on ``GetEvents`` subscribed ``ON_UPDATE`` (queue
  50..200), on a middleware with the same catalog (each value checked as a
  ``float`` signal's, as on the KUKSA side).

For each: signals delivered per second to the subscribers (as fast as the
provider can publish, and at a fixed rate) and the per-signal latency p50/p99
(receive time minus the timestamp the provider gave the value; the receive time
is taken as a response arrives, and it is decoded after the window), each KUKSA
figure with its ratio to the own API's, and the KUKSA databroker's published
figures beside them. Each figure is measured over ``--seconds`` (5) after 1 s
of warm-up. The machine's load average is printed: the figures are only as
good as the machine was quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import grpc
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc

from bench import loads
from bench.loads import (
    BATCH,
    KEYS,
    Figure,
    Tally,
    cancel,
    ended,
    figure,
    finish,
    measure,
    middleware,
    paced,
    started,
    stop,
    timed_window,
)

KUKSA_PUBLISHED = (83_935, 1.2)
"""The KUKSA databroker's published figures: signals/s and p99 ms
(databroker-perf; one provider, one subscriber, about 100 signals)."""
KUKSA_CONDITIONS = "Rust databroker, databroker-perf: 1 provider, 1 subscriber, ~100 signals"
FIXED_RATE = 10_000


def catalog(path: Path) -> None:
    """A VSS catalog of the benchmark's 100 keys, as ``float`` sensors."""
    signals = {
        k.rsplit(".", 1)[1]: {"type": "sensor", "datatype": "float", "description": "Bench."}
        for k in KEYS
    }
    tree = {
        "Vehicle": {
            "type": "branch",
            "description": "Vehicle.",
            "children": {"Bench": {"type": "branch", "description": "Bench.", "children": signals}},
        }
    }
    path.write_text(json.dumps(tree))


# -- the KUKSA provider (its own process) --------------------------------------------


async def provider_main(address: str, rate: float, seconds: float, batch_max: int) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = v2_grpc.VALStub(channel)
        listed = await stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle.Bench"))
        ids = [m.id for m in listed.metadata]
        call = stub.OpenProviderStream()
        failed = 0

        async def responses() -> None:
            # Only a publish that failed is answered (as by the KUKSA databroker).
            nonlocal failed
            while (r := await call.read()) is not grpc.aio.EOF:
                failed += len(r.publish_values_response.status)

        reader = asyncio.create_task(responses())
        sent = 0
        n = 0
        request_id = 0
        async for sizes in paced(rate, seconds, batch_max):
            # As the own API's provider: what is due goes at once, in messages of at
            # most batch_max signals, each signal with its timestamp.
            now = time.time_ns()
            for size in sizes:
                request_id += 1
                request = v2.OpenProviderStreamRequest()
                points = request.publish_values_request.data_points
                request.publish_values_request.request_id = request_id
                for _ in range(size):
                    n += 1
                    point = points[ids[n % len(ids)]]
                    point.value.float = float(n % 1000)
                    point.timestamp.seconds, point.timestamp.nanos = divmod(now, 1_000_000_000)
                await call.write(request)
                sent += size
        await call.done_writing()
        await asyncio.sleep(0.5)  # the last answers
        reader.cancel()
        call.cancel()
        print(f"published {sent} in {request_id} messages, {failed} refused", flush=True)


# -- KUKSA subscribers (this process) -------------------------------------------------


async def subscriber(address: str, tally: Tally, ready: asyncio.Event) -> None:
    """One ``Subscribe`` call; its responses are kept as bytes with their receive time
    and decoded after the window, as the own API's apps do (:meth:`Tally.settle`)."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_stream(
            SUBSCRIBE_METHOD, request_serializer=v2.SubscribeRequest.SerializeToString
        )(v2.SubscribeRequest(signal_paths=KEYS, buffer_size=200))
        await call.read()  # the current values
        tally.sent_times = point_times
        ready.set()
        keep = tally.arrivals.append
        while (raw := await call.read()) is not grpc.aio.EOF:
            if tally.measuring:
                keep((time.time_ns(), raw))


SUBSCRIBE_METHOD = f"/{v2.DESCRIPTOR.services_by_name['VAL'].full_name}/Subscribe"


def point_times(raw: bytes) -> list[int]:
    """A ``SubscribeResponse``'s datapoints' timestamps (ns), from its bytes."""
    # Not Timestamp.ToNanoseconds(): Python code, slower than the arithmetic.
    return [
        p.timestamp.seconds * 1_000_000_000 + p.timestamp.nanos
        for p in v2.SubscribeResponse.FromString(raw).entries.values()
    ]


async def measure_kuksa(
    address: str,
    subscribers: int,
    rate: float,
    seconds: float,
    *,
    batch_max: int = BATCH,
    warmup: float = 1.0,
) -> tuple[Tally, float, str]:
    """``subscribers`` on v2 ``Subscribe`` to the 100 signals, the KUKSA provider at
    ``rate`` (0: as fast as it can) in messages of at most ``batch_max``; ``warmup``
    s, then ``seconds`` measured. The tally, the delivered signals/s (all
    subscribers; the first message of each subscription, the current values, is not
    counted) and what the provider said."""
    tally = Tally()
    async with grpc.aio.insecure_channel(address) as channel:
        # A first value of every signal: each subscription starts with the current values.
        stub = v2_grpc.VALStub(channel)
        for key in KEYS:
            await stub.PublishValue(
                v2.PublishValueRequest(
                    signal_id=t2.SignalID(path=key),
                    data_point=t2.Datapoint(value=t2.Value(float=0)),
                )
            )
    readies = [asyncio.Event() for _ in range(subscribers)]
    tasks = [asyncio.create_task(subscriber(address, tally, r)) for r in readies]
    provider = None
    try:
        await started(readies, tasks)
        provider = await loads.start_provider(
            address, rate, warmup + seconds + 0.5, batch_max, module="bench.kuksa"
        )
        elapsed = await timed_window(tally, seconds, warmup)
        await cancel(tasks)
        said = await finish(provider)
    finally:
        await cancel(tasks)
        await ended(provider)
    return tally, tally.events / elapsed, said


# -- the run ----------------------------------------------------------------------------


async def run_kuksa(
    catalog_path: Path,
    subs: int,
    rate: float,
    seconds: float,
    *,
    batch_max: int = BATCH,
    warmup: float = 1.0,
    flags: tuple[str, ...] = (),
) -> Figure:
    """One window through the KUKSA API on a fresh middleware (``--vss catalog_path``
    and ``flags``), stopped after it."""
    proc, address = middleware("--vss", str(catalog_path), *flags)
    try:
        tally, delivered, said = await measure_kuksa(
            address, subs, rate, seconds, batch_max=batch_max, warmup=warmup
        )
    finally:
        stop(proc)
    if "0 refused" not in said:
        print(f"  (KUKSA provider: {said})")
    return figure(tally, delivered)


async def run_own(catalog_path: Path, subs: int, rate: float, seconds: float) -> Figure:
    """One window through the own API on a fresh middleware with the same catalog as the
    KUKSA window's (its ``float`` values checked the same way), stopped after it."""
    proc, address = middleware("--vss", str(catalog_path))
    try:
        tally, delivered = await measure(
            address, subs, provider_rate=rate, seconds=seconds, latency=True, subscribe=True
        )
    finally:
        stop(proc)
    return figure(tally, delivered)


def show(label: str, k: Figure, o: Figure) -> None:
    print(
        f"{label:<28} {k.rate:>10,.0f} {k.p50:>6.2f} {k.p99:>7.2f} {k.per_message:>6.1f}"
        f" | {o.rate:>10,.0f} {o.p50:>6.2f} {o.p99:>7.2f} {o.per_message:>6.1f}"
        f" | {k.rate / o.rate:>5.2f} {k.p99 / o.p99:>5.2f}",
        flush=True,
    )


async def bench(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(
        f"{len(KEYS)} float signals, 1 provider process (<= {BATCH} signals per message), "
        f"subscribers in one process, a fresh middleware per row; {args.seconds:g} s measured "
        f"after 1 s warm-up; {os.cpu_count()} CPUs, load average before the run "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    print(
        f"{'':<28} {'KUKSA v2 (OpenProviderStream -> Subscribe)':^33}"
        f" | {'own API (Publish -> GetEvents)':^33} | KUKSA/own"
    )
    print(
        f"{'run':<28} {'signals/s':>10} {'p50 ms':>6} {'p99 ms':>7} {'/msg':>6}"
        f" | {'signals/s':>10} {'p50 ms':>6} {'p99 ms':>7} {'/msg':>6} | {'rate':>5} {'p99':>5}"
    )
    rows: list[tuple[str, Figure, Figure]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench-vss.json"
        catalog(path)
        runs = [(1, 0.0), (1, float(FIXED_RATE)), (1, float(KUKSA_PUBLISHED[0]))]
        for subs, rate in [*runs, *[(n, 0.0) for n in args.more]]:
            label = f"{subs} sub, " + ("max speed" if rate == 0 else f"{rate:,.0f} signals/s")
            k = await run_kuksa(path, subs, rate, args.seconds)
            o = await run_own(path, subs, rate, args.seconds)
            rows.append((label, k, o))
            show(label, k, o)
    published, p99 = KUKSA_PUBLISHED
    k1 = rows[0][1]
    print(
        f"\nKUKSA databroker, published: {published:,} signals/s, p99 {p99} ms "
        f"({KUKSA_CONDITIONS}); ours over the KUKSA API, 1 sub at max speed: "
        f"{k1.rate:,.0f} signals/s ({k1.rate / published:.2f} x), p99 {k1.p99:.2f} ms"
    )
    load = os.getloadavg()
    print(f"load average after the run {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kuksa", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("provider", help="(internal) the KUKSA provider process")
    p.add_argument("--address", required=True)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--seconds", type=float, default=7.0)
    p.add_argument("--batch-max", type=int, default=BATCH)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured per row")
    parser.add_argument(
        "--more",
        type=int,
        nargs="*",
        default=[10],
        help="subscriber counts also measured at max speed (default: 10)",
    )
    args = parser.parse_args(argv)
    if args.command == "provider":
        asyncio.run(provider_main(args.address, args.rate, args.seconds, args.batch_max))
        return 0
    asyncio.run(bench(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
