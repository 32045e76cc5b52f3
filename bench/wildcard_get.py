"""What one huge legal-looking request costs everyone else: a KUKSA v1 ``Get`` of
100 entries of ``Vehicle.X.**`` over 20,000 keys, against a middleware process.

Run: ``python -m bench.wildcard_get`` (``--runs 3``; about 10 s a run). Each run
starts a fresh middleware (``serve``, default settings but ``--max-keys``), adds
the keys, then measures a bystander app's ``ListKeys`` round trip every 10 ms:
first with nothing else going on (its floor, in the same run), then while the
huge call is served. Prints per run and as median (min-max) over the runs: how
long the huge call took to be answered (refused: RESOURCE_EXHAUSTED), the
bystander's worst round trip during it beside its floor, and the middleware's
resident memory before and after (from /proc). A middleware that builds the
whole 45 MB response before refusing it freezes everyone for seconds; one that
counts as it goes refuses it after about 4 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import grpc
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2 as t1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2 as v1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2_grpc as v1_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

from bench.e2e import middleware, stop

KEYS = 20_000
ENTRIES = 100


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bystander(stub: vstore_pb2_grpc.VStoreStub, until: asyncio.Event) -> list[float]:
    """Round trips (s) of a small call every 10 ms until ``until`` is set."""
    times = []
    md = (("app-id", "bystander"),)
    while not until.is_set():
        t = time.perf_counter()
        await stub.ListKeys(vstore_pb2.ListKeysRequest(prefix="Vehicle.X.K0_1"), metadata=md)
        times.append(time.perf_counter() - t)
        await asyncio.sleep(0.01)  # the bystander's pace
    return times


async def one_run() -> dict[str, float]:
    proc, address = middleware("--max-keys", str(KEYS + 1000))
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            vstore = vstore_pb2_grpc.VStoreStub(channel)
            md = (("app-id", "hostile"),)
            for b in range(KEYS // 1000):
                names = [f"Vehicle.X.K{b}_{i}" for i in range(1000)]
                await vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=md)
            before = rss_mb(proc.pid)
            quiet = asyncio.Event()
            idle = asyncio.create_task(bystander(vstore, quiet))
            await asyncio.sleep(1.0)  # the floor's window
            quiet.set()
            floor = max(await idle)
            busy = asyncio.Event()
            during = asyncio.create_task(bystander(vstore, busy))
            entry = v1.EntryRequest(path="Vehicle.X.**", view=t1.VIEW_ALL)
            t = time.perf_counter()
            try:
                await v1_grpc.VALStub(channel).Get(
                    v1.GetRequest(entries=[entry] * ENTRIES), metadata=md
                )
            except grpc.aio.AioRpcError as e:
                if e.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
            took = time.perf_counter() - t
            busy.set()
            worst = max(await during)
            return {
                "call_s": took,
                "bystander_worst_ms": worst * 1e3,
                "bystander_floor_ms": floor * 1e3,
                "rss_before_mb": before,
                "rss_after_mb": rss_mb(proc.pid),
            }
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for i in range(args.runs):
        r = asyncio.run(one_run())
        runs.append(r)
        print(f"run {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()), flush=True)
    print(f"median (min-max) of {args.runs} runs:")
    for k in runs[0]:
        values = [r[k] for r in runs]
        print(f"  {k:20} {statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
