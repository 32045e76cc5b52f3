"""The ``Events`` stream's window: what an app lags behind is bounded by its
queues plus its window of batches, not by what transport buffers hold.

Against a real server on loopback: the raw protocol (open, acknowledge, the
errors), and the SDK's slow reader measured by the age of what it receives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.sdk import (
    AppClient,
    DataEvent,
    ProviderClient,
    QueueSpec,
    StreamReplacedError,
    Sub,
)
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually
from tests.integration.test_bad_input import check

KEYS = [f"Vehicle.Window.Test{i}" for i in range(5)]


async def _writer(address: str, stop: asyncio.Event, per_s: int) -> int:
    """A provider writing ``per_s`` updates a second round-robin over KEYS until ``stop``."""
    written = 0
    async with ProviderClient(address, "writer") as provider:
        await provider.add_keys(KEYS)
        start = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - start) * per_s)
            for _ in range(due - written):
                await provider.publish({KEYS[written % len(KEYS)]: written.to_bytes(8, "big")})
                written += 1
            await asyncio.sleep(0.002)  # the writer's pace, not synchronisation
        await provider.flush()
    return written


def _open(window: int, max_length: int = 100) -> ess_pb2.EventsRequest:
    queue = ess_pb2.QueueConfig(queue=0, min_length=1, max_length=max_length)
    return ess_pb2.EventsRequest(open=ess_pb2.OpenEvents(queues=[queue], window=window))


async def _add_keys(connect: Any) -> None:
    """Before the app's stream opens: no KeyAdded events (they count in the window too)."""
    await connect("adder").vstore.AddKeys(
        vstore_pb2.AddKeysRequest(names=KEYS), metadata=(("app-id", "adder"),)
    )


async def _subscribe(connect: Any, app: str) -> None:
    subs = [ess_pb2.Subscription(key=k, trigger=ess_pb2.TRIGGER_ON_UPDATE) for k in KEYS]
    await connect(app).events.Register(
        ess_pb2.RegisterRequest(subscriptions=subs), metadata=(("app-id", app),)
    )


class _Reader:
    """Reads a raw call with timeouts (cancelling a grpc.aio read cancels the call)."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._next: asyncio.Future[Any] | None = None

    async def batches(self, quiet: float) -> list[Any]:
        """The messages read until nothing arrives for ``quiet`` seconds."""
        got = []
        while True:
            if self._next is None:
                self._next = asyncio.ensure_future(self._call.read())
            done, _ = await asyncio.wait([self._next], timeout=quiet)
            if not done:
                return got
            got.append(self._next.result())
            self._next = None


async def test_the_middleware_sends_no_more_than_the_window_until_the_app_acknowledges(
    server: RunningServer, connect: Any
) -> None:
    await _add_keys(connect)
    stubs = connect("raw")
    call = stubs.events.Events(metadata=stubs.md)
    await call.write(_open(window=3, max_length=5))
    started = (await call.read()).events[0].started
    assert started.window == 3
    await _subscribe(connect, "raw")

    stop = asyncio.Event()
    writer = asyncio.create_task(_writer(server.address, stop, per_s=500))
    try:
        # Writes go on, but the app acknowledges nothing: exactly the window arrives.
        reader = _Reader(call)
        assert len(await reader.batches(quiet=0.5)) == 3
        await call.write(ess_pb2.EventsRequest(read=1))
        (made_now,) = await reader.batches(quiet=0.5)
        await call.write(ess_pb2.EventsRequest(read=3))
        assert len(await reader.batches(quiet=0.5)) == 3
    finally:
        stop.set()
        await writer
    # The batch made when the app acknowledged carried what the queue held then:
    # the newest value of each key (5 keys, a queue of 5), the rest dropped.
    assert len(made_now.events) == 5
    assert {e.data_updated.key for e in made_now.events} == set(range(1, 6))
    now = time.time_ns()
    assert all(now - e.data_updated.time_ns < 1.5e9 for e in made_now.events)
    # The rest waited in the queue, where the drop rule kept the newest per key.
    assert server.runtime.ess.pending("raw")
    call.cancel()


async def _read_to_the_end(call: Any) -> None:
    while True:
        await call.read()


async def test_window_protocol_errors_end_the_stream_with_a_clear_status(
    server: RunningServer, connect: Any
) -> None:
    settings = server.runtime.settings.limits

    async def status(*requests: ess_pb2.EventsRequest) -> tuple[grpc.StatusCode, str]:
        stubs = connect("bad")
        call = stubs.events.Events(metadata=stubs.md)
        for r in requests:
            await call.write(r)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _read_to_the_end(call)
        return err.value.code(), err.value.details() or ""

    code, details = await status(ess_pb2.EventsRequest(read=1))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "open" in details
    assert "first" in details

    code, details = await status(_open(window=settings.max_stream_window + 1))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "open.window" in details
    assert str(settings.max_stream_window) in details

    code, details = await status(_open(window=4), ess_pb2.EventsRequest(read=5))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "5 exceeds the 0 messages" in details

    code, details = await status(_open(window=4), _open(window=4))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "only the first" in details
    # Each failed stream took its app away with it; nothing else changed.
    await eventually(
        lambda: "bad" not in server.runtime.ess.apps(), timeout=10, what="the app 'bad' gone"
    )
    check(server)


async def test_the_server_default_window_applies_when_the_app_asks_none(
    server: RunningServer, connect: Any
) -> None:
    stubs = connect("default")
    call = stubs.events.Events(metadata=stubs.md)
    await call.write(_open(window=0))
    started = (await call.read()).events[0].started
    assert started.window == server.runtime.settings.limits.stream_window
    call.cancel()


async def test_a_slow_app_never_receives_events_older_than_its_queue_and_window_hold(
    server: RunningServer,
) -> None:
    """An app reading one batch every 0.2 s while a provider writes 500/s.

    Its window is one batch, made when it acknowledges the previous one, of what
    its 5-event queue holds then (the newest value of each of the 5 keys): what it
    receives is at most about two reading periods old (0.4 s). Without the window
    the transport buffers would hold thousands of small batches and the age would
    grow by 0.8 s every second.
    """
    stop = asyncio.Event()
    writer = asyncio.create_task(_writer(server.address, stop, per_s=500))
    ages: list[tuple[float, float]] = []  # (when, age) of each event received
    missed = 0
    async with AppClient(
        server.address, "slow", queues=[QueueSpec(0, 1, 5)], window=1, reconnect=False
    ) as app:
        assert app.window == 1
        store = server.runtime.store
        await eventually(
            lambda: all(store.id_of(k) is not None for k in KEYS),
            timeout=10,
            what="the writer to add the keys",
        )
        await app.subscribe([Sub(k, on_update=True) for k in KEYS])
        start = time.monotonic()
        async for batch in app.batches():
            now = time.time_ns()
            for e in batch:
                if isinstance(e, DataEvent):
                    ages.append((time.monotonic() - start, (now - e.time_ns) / 1e9))
                    missed += e.missed
            if time.monotonic() - start > 4.0:
                break
            await asyncio.sleep(0.2)  # the slow app's pace: the behaviour tested
    stop.set()
    written = await writer
    late = [age for when, age in ages if when > 1.0]
    assert len(late) >= 40, ages
    # The bound holds over the whole run (plus scheduling slack on a busy machine).
    assert max(late) < 1.0, max(late)
    # What the app did not read was dropped in the queue, visible as seq gaps.
    assert missed > written / 2, (missed, written)


async def _holding_a_batch(address: str, app: AppClient) -> AsyncIterator[list[Any]]:
    """``app``'s batches, once one has arrived and is held (not yet acknowledged)."""
    async with ProviderClient(address, "writer") as provider:
        await provider.add_keys(KEYS[:1])
        await app.subscribe([Sub(KEYS[0], on_update=True)])
        await provider.publish({KEYS[0]: b"\x01"})
        await provider.flush()
    batches = app.batches()
    await asyncio.wait_for(anext(batches), 5)
    return batches


async def test_closing_while_the_app_holds_a_batch_ends_its_iteration(
    server: RunningServer,
) -> None:
    """window=2 acknowledges every batch when the app asks for the next: after
    close() there is nothing to acknowledge on, and asking ends the iteration."""
    app = AppClient(server.address, "holder", window=2, reconnect=False)
    await app.connect()
    batches = await _holding_a_batch(server.address, app)
    await app.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(batches), 5)


async def test_a_stream_ended_while_the_app_holds_a_batch_says_why(
    server: RunningServer,
) -> None:
    """The middleware ends the stream (another instance takes the app over) while
    the app holds a batch: asking for the next says the stream ended, not grpc's
    'RPC already finished' or INTERNAL. (Whether the reason survives depends on
    whether the end reached the app before its acknowledgement left: grpc answers
    a write to an ended call with an INTERNAL of its own, which replaces the
    middleware's status.)"""
    app = AppClient(server.address, "holder", window=2, reconnect=False)
    await app.connect()
    batches = await _holding_a_batch(server.address, app)
    async with AppClient(server.address, "holder", reconnect=False):
        with pytest.raises((StreamReplacedError, RuntimeError), match=r"replaced|ended"):
            await _read(batches, 3)
    await app.close()


async def _read(batches: AsyncIterator[list[Any]], most: int) -> None:
    """Read up to ``most`` batches: those the middleware sent before it ended the
    stream (at most its window) still arrive first, then the end."""
    for _ in range(most):
        await asyncio.wait_for(anext(batches), 5)
