"""Journal export benchmark: how fast the journal leaves the car.

Run: ``make bench-export`` (or ``python -m bench.journal_export``). One
middleware with its journal at ``full`` and no apps; bench.e2e's provider
process writes as fast as it can in messages of ``--batch`` updates (each
message is one ``publish_batch`` record, so the journal writes about one
record per message). In each phase the journal writer's own rate is measured
in the same window (by its newest offset), beside:

1. the writer alone (``--seconds``);
2. Poll: a reliable consumer polling ``max`` 1000 as fast as it can, from the
   oldest record held (so it reads a backlog from disk first), while the
   provider writes;
3. Follow: the same with one Follow stream (groups of 1000, a window of 64,
   every group acknowledged);
4. the collector: ``python -m vehicle_middleware.telemetry_export collect --once`` draining the
   whole journal into a landing area (a temporary directory), records landed
   per second of its run (process start included).

Figures depend on the machine and what else runs on it; the command prints
the set-up with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from vehicle_middleware.contract.journal.chain import distance, pred
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as pb
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2_grpc as pb_grpc

from bench.e2e import middleware, stop

MD = (("app-id", "bench-export"),)


def provider(address: str, seconds: float, batch: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.e2e",
            "provider",
            "--address",
            address,
            "--seconds",
            str(seconds),
            "--batch-max",
            str(batch),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


async def newest(stub: pb_grpc.JournalServiceStub) -> tuple[str, int]:
    """The journal's current boot and newest offset (a live poll that holds nothing)."""
    for _ in range(100):  # just started: its first record may not be written yet
        try:
            answer = await stub.Poll(pb.PollRequest(component="LIVE", offset=0, max=1), metadata=MD)
            break
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            await asyncio.sleep(0.01)
    else:
        raise RuntimeError("the middleware's journal wrote no record within a second")
    kind = answer.WhichOneof("answer")
    if kind == "recovery":
        return answer.recovery.boot_id, answer.recovery.n1
    if kind == "records":
        return answer.records.newest_boot_id, answer.records.newest_offset
    return answer.nothing_new.boot_id, answer.nothing_new.offset


async def measured(
    stub: pb_grpc.JournalServiceStub,
    address: str,
    args: argparse.Namespace,
    consume: Callable[[float], Awaitable[int]] | None,
) -> tuple[float, float]:
    """(consumer records/s, writer records/s) over ``args.seconds`` of provider load."""
    _, before = await newest(stub)
    load = provider(address, args.seconds, args.batch)
    start = time.perf_counter()
    got = await consume(start + args.seconds) if consume is not None else 0
    load.wait(args.seconds + 30)
    elapsed = time.perf_counter() - start
    _, after = await newest(stub)
    return got / elapsed, distance(before, after) / elapsed


async def poll_until(stub: pb_grpc.JournalServiceStub, component: str, deadline: float) -> int:
    reg = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component=component), metadata=MD)
    boot, offset, got = reg.position.boot_id, reg.position.offset, 0
    while time.perf_counter() < deadline:
        answer = await stub.Poll(
            pb.PollRequest(component=component, boot_id=boot, offset=offset, max=1000),
            metadata=MD,
        )
        kind = answer.WhichOneof("answer")
        if kind == "records":
            got += len(answer.records.lines)
            boot, offset = answer.records.boot_id, answer.records.last_offset
        elif kind == "recovery":
            boot, offset = answer.recovery.boot_id, pred(answer.recovery.n0)
        else:
            await asyncio.sleep(0.001)
    return got


async def follow_until(stub: pb_grpc.JournalServiceStub, component: str, deadline: float) -> int:
    reg = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component=component), metadata=MD)
    call = stub.Follow(metadata=MD)
    await call.write(
        pb.FollowRequest(
            start=pb.FollowStart(
                component=component,
                boot_id=reg.position.boot_id,
                offset=reg.position.offset,
                max=1000,
                window=64,
            )
        )
    )
    got = 0
    try:
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return got
            try:
                group = await asyncio.wait_for(call.read(), remaining)
            except TimeoutError:
                return got
            if group is grpc.aio.EOF:
                return got
            got += len(group.records.lines)
            await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=group.seq)))
    finally:
        call.cancel()


def collect_once(address: str, landing: Path) -> tuple[int, float]:
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.telemetry_export",
            "collect",
            "--from",
            address,
            "--to",
            str(landing),
            "--once",
            "--component",
            "bench_collect",
            "--progress-s",
            "3600",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    elapsed = time.perf_counter() - start
    summary = json.loads(done.stdout)
    return sum(v["records"] for v in summary["vehicles"].values()), elapsed


async def bench(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="vmw-bench-export-"))
    mw, address = middleware(
        "--journal-dir",
        str(work / "journal"),
        "--journal-level",
        "full",
        "--journal-max-bytes",
        str(4 * 1024**3),
    )
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.JournalServiceStub(channel)
            print(
                f"one middleware, journal full, provider messages of {args.batch} updates, "
                f"{args.seconds:g} s per phase"
            )
            print(f"{'phase':<34} {'records/s':>12} {'writer records/s':>18}")
            _, writer = await measured(stub, address, args, None)
            print(f"{'journal writer alone':<34} {'':>12} {writer:>18,.0f}")
            got, writer = await measured(
                stub, address, args, lambda end: poll_until(stub, "bench_poll", end)
            )
            print(f"{'Poll (max 1000), from the oldest':<34} {got:>12,.0f} {writer:>18,.0f}")
            got, writer = await measured(
                stub, address, args, lambda end: follow_until(stub, "bench_follow", end)
            )
            print(f"{'Follow (1000/group, window 64)':<34} {got:>12,.0f} {writer:>18,.0f}")
        landed, elapsed = collect_once(address, work / "landing")
        print(
            f"{'collector --once into a landing':<34} {landed / elapsed:>12,.0f} "
            f"{'(idle)':>18}   {landed:,} records in {elapsed:.2f} s"
        )
    finally:
        stop(mw)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="load per phase")
    parser.add_argument("--batch", type=int, default=8, help="updates per provider message")
    asyncio.run(bench(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
