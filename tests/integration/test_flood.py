"""A client flooding the middleware beyond its rate limit does not take a
well-behaved client's latency with it; a flood of streams leaves nothing behind.

The middleware, the flooder and the measured client are three processes, as
in a vehicle. The flooder sends as fast as it can from 16 concurrent calls;
it is refused (RESOURCE_EXHAUSTED) beyond its rate. The polite client's call
latency is measured before and during the flood.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

from tests.conftest import eventually
from tests.integration.conftest import NewServer

FLOODER = textwrap.dedent("""
    import asyncio, sys, time, grpc
    from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

    async def main(address, seconds):
        ok = refused = 0
        async with grpc.aio.insecure_channel(address) as channel:
            stub = vstore_pb2_grpc.VStoreStub(channel)
            md = (("app-id", "flooder"),)
            deadline = time.monotonic() + seconds

            async def worker():
                nonlocal ok, refused
                while time.monotonic() < deadline:
                    try:
                        await stub.ListKeys(vstore_pb2.ListKeysRequest(), metadata=md)
                        ok += 1
                    except grpc.aio.AioRpcError as e:
                        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
                        refused += 1

            await asyncio.gather(*(worker() for _ in range(16)))
        print(ok, refused, flush=True)

    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
""")


def start_middleware() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.server",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "WARNING",
            "--rate-limit-rps",
            "200",
            "--rate-limit-burst",
            "200",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"middleware did not start: {line!r}")
    return proc, line.split()[-1]


async def polite_latencies_ms(address: str, calls: int) -> list[float]:
    out = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = vstore_pb2_grpc.VStoreStub(channel)
        md = (("app-id", "polite"),)
        await stub.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.Speed"]), metadata=md)
        for i in range(calls):  # 100 calls/s: well inside its limit
            t0 = time.perf_counter()
            await stub.Set(
                vstore_pb2.SetRequest(
                    updates=[vstore_pb2.Update(name="Vehicle.Speed", data=i.to_bytes(4, "big"))]
                ),
                metadata=md,
            )
            out.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.01)  # the polite client's own pace, not synchronisation
    return out


def p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))]


async def test_a_flooding_client_is_refused_and_a_polite_one_keeps_its_latency() -> None:
    mw, address = start_middleware()
    flooder = None
    try:
        before = await polite_latencies_ms(address, 150)
        flooder = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            FLOODER,
            address,
            "4",
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        during = await polite_latencies_ms(address, 150)
        out, _ = await asyncio.wait_for(flooder.communicate(), 30)
        ok, refused = map(int, out.split())
    finally:
        if flooder is not None and flooder.returncode is None:
            flooder.kill()
        mw.send_signal(signal.SIGTERM)
        mw.wait(15)
    print(
        f"polite Set latency ms: before p50 {statistics.median(before):.2f} p99 {p99(before):.2f}; "
        f"during flood p50 {statistics.median(during):.2f} p99 {p99(during):.2f}; "
        f"flooder ok {ok} refused {refused}"
    )
    assert refused > ok  # the flood went far beyond its 200/s
    assert ok <= 200 * 5 + 200  # its rate (4 s at 200/s) plus its burst, with slack
    assert statistics.median(during) < max(5 * statistics.median(before), 5.0)
    assert p99(during) < max(5 * p99(before), 25.0)


@pytest.mark.settings(max_apps=200, event_budget_per_app=100)  # 200 apps fit the budget
async def test_a_flood_of_streams_on_the_unix_socket_gives_its_memory_back_when_it_ends(
    new_server: NewServer, tmp_path: Path
) -> None:
    """200 apps open a stream each on the Unix socket, then all leave: the streams'
    state is gone, and the allocator's share of the memory they used is handed back
    (:mod:`vehicle_middleware.server.memory_trim`: it kept 30 MB of a 1,000-app flood before)."""
    running = await new_server(unix_socket=str(tmp_path / "vehicle_middleware.sock"))
    assert running.memory is not None
    address = f"unix:{tmp_path / 'vehicle_middleware.sock'}"
    channels = [grpc.aio.insecure_channel(address) for _ in range(200)]
    try:
        calls = [
            ess_pb2_grpc.EventServiceStub(ch).GetEvents(
                ess_pb2.GetEventsRequest(), metadata=(("app-id", f"flood-{i}"),)
            )
            for i, ch in enumerate(channels)
        ]
        await asyncio.gather(*(call.read() for call in calls))  # each stream is open
        assert len(running.runtime.streams) == 200
        assert running.memory.trims == 0
        for call in calls:
            call.cancel()
        await eventually(lambda: len(running.runtime.streams) == 0, timeout=30, what="apps gone")
        await eventually(lambda: running.memory.trims == 1, timeout=30, what="a trim")
    finally:
        await asyncio.gather(*(ch.close() for ch in channels))
