"""The collector: one or many middlewares (one per vehicle) followed as a reliable
consumer of their ``JournalService``, into a landing area.

Per source it registers, takes the vehicle's position from the landing area
(:mod:`vehicle_middleware.telemetry_export.positions`), then reads with ``Follow`` (or ``Poll``,
with
``poll`` or ``once``), hands what arrives to the vehicle's state
(:mod:`vehicle_middleware.telemetry_export.vehicle_state`) and lands it. It acknowledges only what
is
landed (``Follow``'s acks, or the ``ack`` of its next ``Poll``: it polls from
the last record received and acknowledges the last one landed), so the
middleware releases only that. Transient errors reconnect with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import grpc
from vehicle_middleware.contract.channel import RECEIVE_LIMIT, open_channel
from vehicle_middleware.contract.wire import APP_ID_HEADER, AUTH_HEADER
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as pb
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2_grpc as pb_grpc
from vehicle_middleware.sdk import Tls
from vehicle_middleware.telemetry_export.errors import CollectError
from vehicle_middleware.telemetry_export.landing_area import Landing
from vehicle_middleware.telemetry_export.positions import (
    Position,
    complete_pending,
    load_position,
    save_position,
)
from vehicle_middleware.telemetry_export.vehicle_state import Vehicle

__all__ = ["Collector", "Options"]

log = logging.getLogger(__name__)

_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)
_RETRYABLE: Final = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
_TOO_LARGE: Final = "Received message larger than max"
"""gRPC's RESOURCE_EXHAUSTED when a message is over the channel's receive limit: the
same answer would come again, so it is fatal (a middleware's RESOURCE_EXHAUSTED, e.g. a
rate limit, is retried)."""


class _StreamEnded(Exception):
    """A Follow stream ended without an error status: connect again."""


@dataclass(frozen=True, slots=True)
class Options:
    component: str = "collector"
    name: str = "collector"
    """The collector's name in its records and file names, and in the position's lease."""
    app_id: str = "collector"
    token: str = ""
    tls: Tls | None = None
    once: bool = False
    poll: bool = False
    max_records: int = 1000
    window: int = 64
    flush_s: float = 1.0
    flush_records: int = 100_000
    poll_interval_s: float = 0.2
    progress_s: float = 5.0
    lease_s: float = 30.0
    take_over: bool = False
    retry_s: float = 30.0
    """--once: give up on a source that does not answer for this long."""


class Collector:
    """Collect from ``sources`` into ``landing`` until stopped (or drained, with ``once``)."""

    def __init__(self, sources: Sequence[str], landing: Landing, options: Options) -> None:
        self.sources = list(sources)
        self.landing = landing
        self.o = options
        self.vehicles: dict[str, Vehicle] = {}
        self.failures: dict[str, str] = {}
        self._stop = asyncio.Event()
        md: list[tuple[str, str]] = [(APP_ID_HEADER, options.app_id)]
        if options.token:
            md.append((AUTH_HEADER, f"Bearer {options.token}"))
        self._md = tuple(md)

    def _channel(self, address: str) -> grpc.aio.Channel:
        """The SDK's channel: keepalive pings (a middleware that goes silent, e.g. a car
        that lost power, ends the call within seconds, even an idle Follow: it would
        wait forever otherwise while the lease keeps other collectors out), quick
        reconnects, the receive limit, and TLS."""
        return open_channel(address, tls=self.o.tls)

    def stop(self) -> None:
        """Stop cleanly: land what is buffered, store positions, end."""
        self._stop.set()

    async def run(self) -> int:
        """0 when every source was collected (drained, with ``once``) or stopped cleanly."""
        progress = asyncio.create_task(self._progress())
        try:
            await asyncio.gather(*(self._source(s) for s in self.sources))
        finally:
            progress.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await progress
            self._print_progress(final=True)
        return 1 if self.failures else 0

    async def _source(self, address: str) -> None:
        try:
            await self._collect(address)
        except CollectError as e:
            self._fail(address, str(e))

    async def _collect(self, address: str) -> None:
        """Collect one source until stopped (or drained); reconnect on transient errors.

        Raises:
            CollectError: the source cannot be collected (refused, another collector
                holds or took its vehicle, the landing area fails).
        """
        backoff = 0.2
        vehicle: Vehicle | None = None
        since = time.monotonic()
        while not self._stop.is_set():
            try:
                async with self._channel(address) as channel:
                    stub = pb_grpc.JournalServiceStub(channel)  # type: ignore[no-untyped-call]
                    reg = await stub.RegisterConsumer(
                        pb.RegisterConsumerRequest(component=self.o.component),
                        metadata=self._md,
                        timeout=10,
                    )
                    if vehicle is None:
                        vehicle = await asyncio.to_thread(self._attach, address, reg)
                    backoff, since = 0.2, time.monotonic()
                    vehicle.state = "collecting"
                    if self.o.poll or self.o.once:
                        await self._poll(stub, vehicle)
                    else:
                        await self._follow(stub, vehicle)
                    if self.o.once:
                        return
            except grpc.aio.AioRpcError as e:
                if vehicle is not None:
                    await self._flush(vehicle)
                    vehicle.state = f"reconnecting ({e.code().name})"
                if _TOO_LARGE in (e.details() or ""):
                    raise CollectError(
                        f"an answer was larger than this collector receives ({e.details()}; "
                        f"its limit is {RECEIVE_LIMIT // 2**20} MiB): the middleware's "
                        "answers are bounded by its max_message_bytes (less 64 KiB); set "
                        f"it to {RECEIVE_LIMIT // 2**20} MiB or less"
                    ) from None
                if e.code() not in _RETRYABLE:
                    raise CollectError(f"{e.code().name}: {e.details()}") from None
                if self.o.once and time.monotonic() - since > self.o.retry_s:
                    raise CollectError(
                        f"no answer for {self.o.retry_s:g} s ({e.details()})"
                    ) from None
                log.info(
                    "collect: %s: %s (%s); retrying in %.1f s",
                    address,
                    e.code().name,
                    e.details(),
                    backoff,
                )
            except _StreamEnded:
                log.info("collect: %s: the Follow stream ended; following again", address)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff)
            backoff = min(2.0, backoff * 2)
        if vehicle is not None:
            await self._flush(vehicle)

    def _fail(self, address: str, why: str) -> None:
        self.failures[address] = why
        log.error("collect: %s: %s", address, why)

    def _attach(self, address: str, reg: pb.RegisterConsumerResponse) -> Vehicle:
        """The vehicle of a source: its position from the landing area (a pending flush
        completed), or where the registration put the consumer."""
        vid = reg.vehicle_id
        if _NAME.fullmatch(vid) is None:
            raise CollectError(f"vehicle id {vid!r} cannot name a landing directory")
        if vid in self.vehicles:
            raise CollectError(f"vehicle {vid!r} is also served by {self.vehicles[vid].address}")
        held = load_position(self.landing, vid)
        if held is None:
            position = Position(boot_id=reg.position.boot_id, offset=reg.position.offset)
        else:
            age = (time.time_ns() - held.heartbeat_ns) / 1e9
            if held.owner != self.o.name and age < self.o.lease_s and not self.o.take_over:
                raise CollectError(
                    f"vehicle {vid!r} is collected by {held.owner!r} (its position was written "
                    f"{age:.0f} s ago; the lease is {self.o.lease_s:g} s): stop it, wait, or "
                    "pass --take-over"
                )
            complete_pending(self.landing, vid, held, self.o.name)
            position = held.position
        vehicle = Vehicle(vid, address, self.o.name, position)
        save_position(self.landing, vid, position, self.o.name)  # take the lease
        self.vehicles[vid] = vehicle
        log.info(
            "collect: %s (%s) from boot %s offset %d",
            vid,
            address,
            position.boot_id or "(none)",
            position.offset,
        )
        return vehicle

    async def _flush(self, vehicle: Vehicle) -> None:
        await asyncio.to_thread(vehicle.flush, self.landing, heartbeat_s=self.o.lease_s / 3)

    def _due(self, vehicle: Vehicle) -> bool:
        return (
            vehicle.buffered >= self.o.flush_records
            or vehicle.boot_stopped
            or (vehicle.dirty and time.monotonic() - vehicle.buffered_since >= self.o.flush_s)
        )

    async def _poll(self, stub: pb_grpc.JournalServiceStub, vehicle: Vehicle) -> None:
        while not self._stop.is_set():
            at, landed = vehicle.at, vehicle.landed
            answer = await stub.Poll(
                pb.PollRequest(
                    component=self.o.component,
                    boot_id=at.boot_id,
                    offset=at.offset,
                    max=self.o.max_records,
                    # Read on from what it received; release only what it landed.
                    ack=pb.Position(boot_id=landed.boot_id, offset=landed.offset),
                ),
                metadata=self._md,
                timeout=30,
            )
            kind = answer.WhichOneof("answer")
            if kind == "records":
                vehicle.take_records(answer.records)
            elif kind == "recovery":
                vehicle.take_recovery(answer.recovery)
            else:
                await self._flush(vehicle)
                if self.o.once:
                    # Acknowledge what is landed, then stop: drained.
                    landed = vehicle.landed
                    await stub.Poll(
                        pb.PollRequest(
                            component=self.o.component,
                            boot_id=landed.boot_id,
                            offset=landed.offset,
                            max=1,
                        ),
                        metadata=self._md,
                        timeout=30,
                    )
                    vehicle.drained = True
                    vehicle.state = "drained"
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.o.poll_interval_s)
                continue
            if self._due(vehicle):
                await self._flush(vehicle)

    async def _follow(self, stub: pb_grpc.JournalServiceStub, vehicle: Vehicle) -> None:
        call = stub.Follow(metadata=self._md)
        at = vehicle.landed
        await call.write(
            pb.FollowRequest(
                start=pb.FollowStart(
                    component=self.o.component,
                    boot_id=at.boot_id,
                    offset=at.offset,
                    max=self.o.max_records,
                    window=self.o.window,
                )
            )
        )
        queue: asyncio.Queue[pb.FollowBatch | None] = asyncio.Queue()

        async def read() -> None:
            try:
                while True:
                    message = await call.read()
                    if message is grpc.aio.EOF:
                        break
                    await queue.put(message)
            finally:
                await queue.put(None)

        reader = asyncio.create_task(read())
        stop = asyncio.create_task(self._stop.wait())
        expected, unacked = 0, 0
        try:
            while True:
                timeout = self.o.lease_s / 3  # at least a heartbeat for the lease
                if vehicle.dirty:
                    timeout = max(0.0, vehicle.buffered_since + self.o.flush_s - time.monotonic())
                got = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait(
                    {got, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if got not in done:
                    got.cancel()
                    if stop in done:
                        break
                    message = None
                    timed_out = True
                else:
                    message, timed_out = got.result(), False
                    if message is None:
                        await reader  # raises the stream's error
                        raise _StreamEnded()
                if message is not None:
                    if message.seq != expected:
                        log.error(
                            "collect: %s: Follow group %d came after %d: a gap in a reliable "
                            "stream; following again from the landed position",
                            vehicle,
                            message.seq,
                            expected - 1,
                        )
                        vehicle.discard()
                        raise _StreamEnded()
                    expected += 1
                    unacked += 1
                    if message.WhichOneof("answer") == "records":
                        vehicle.take_records(message.records)
                    else:
                        vehicle.take_recovery(message.recovery)
                if timed_out or unacked >= self.o.window or self._due(vehicle):
                    await self._flush(vehicle)
                    if unacked:
                        try:
                            await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=expected - 1)))
                        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                            # The call ended as the ack went out (the middleware stopped
                            # or died): the reader holds its status; follow again.
                            await reader  # raises the stream's error, if it had one
                            raise _StreamEnded() from None
                        unacked = 0
        finally:
            stop.cancel()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reader
            await self._flush(vehicle)
            with contextlib.suppress(
                grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError, asyncio.InvalidStateError
            ):
                if unacked and not call.done():
                    await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=expected - 1)))
            call.cancel()

    # -- progress ------------------------------------------------------------------------------

    async def _progress(self) -> None:
        self._last = (time.monotonic(), 0)
        while True:
            await asyncio.sleep(self.o.progress_s)
            self._print_progress()

    def _print_progress(self, *, final: bool = False) -> None:
        now = time.monotonic()
        total = sum(v.counts.records for v in self.vehicles.values())
        then, before = getattr(self, "_last", (now, 0))
        rate = (total - before) / (now - then) if now > then else 0.0
        self._last = (now, total)
        parts = [f"{v}: {v.lag()}, {v.state}" for v in self.vehicles.values()]
        parts += [f"{a}: FAILED {why}" for a, why in self.failures.items()]
        head = "collect done" if final else "collect"
        print(
            f"{head}: {total:,} records landed ({rate:,.0f} records/s); " + "; ".join(parts),
            file=sys.stderr,
            flush=True,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "landing": self.landing.target,
            "vehicles": {
                v.vehicle_id: dataclasses.asdict(v.counts)
                | {"boot_id": v.landed.boot_id, "offset": v.landed.offset, "drained": v.drained}
                for v in self.vehicles.values()
            },
            "failed": self.failures,
        }
