"""The budget of stream writes (``stream_writes_per_s``) against a real server on loopback.

Beyond the budget a write waits its turn, and the app's queues collect what
arrives meanwhile for it: fewer, larger messages, every event still there, in
order, with its exact seq.
"""

from __future__ import annotations

from typing import Any

import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.server.server import RunningServer

KEY = "Vehicle.Paced.Level"
WRITES = 100


async def _open_app(connect: Any, app: str) -> Any:
    """``app``'s GetEvents stream on KEY (every write queued: a queue of 1,000)."""
    stubs = connect(app)
    call = stubs.events.GetEvents(
        ess_pb2.GetEventsRequest(queues=[ess_pb2.QueueConfig(queue=0, max_length=1000)]),
        metadata=stubs.md,
    )
    assert (await call.read()).events[0].HasField("started")
    await stubs.events.Register(
        ess_pb2.RegisterRequest(
            subscriptions=[ess_pb2.Subscription(key=KEY, trigger=ess_pb2.TRIGGER_ON_UPDATE)]
        ),
        metadata=stubs.md,
    )
    return call


async def _add_key(connect: Any) -> Any:
    stubs = connect("provider")
    await stubs.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=[KEY]), metadata=stubs.md)
    return stubs


async def _write_one_by_one(provider: Any) -> None:
    """WRITES values, each a Set of its own that returns before the next: each one
    finds the app's queue empty and wakes it."""
    for i in range(WRITES):
        update = vstore_pb2.Update(name=KEY, data=i.to_bytes(2, "big"))
        await provider.vstore.Set(vstore_pb2.SetRequest(updates=[update]), metadata=provider.md)


async def _events(call: Any, count: int) -> tuple[list[tuple[int, bytes]], int]:
    """Read until ``count`` data events came: ``(seq, value)`` of each, and the messages."""
    got: list[tuple[int, bytes]] = []
    messages = 0
    while len(got) < count:
        batch = await call.read()
        messages += 1
        got += [(e.data_updated.seq, e.data_updated.data) for e in batch.events]
    return got, messages


async def paced_delivery(connect: Any) -> int:
    """WRITES one by one to an app, on a server with a budget of 20 writes a second:
    the app gets every event, in order, with its seq; the messages it took."""
    provider = await _add_key(connect)
    call = await _open_app(connect, "paced")
    await _write_one_by_one(provider)
    got, messages = await _events(call, WRITES)
    call.cancel()
    assert got == [(i + 1, i.to_bytes(2, "big")) for i in range(WRITES)]  # all, in order
    return messages


@pytest.mark.settings(stream_writes_per_s=20)
async def test_beyond_the_budget_an_app_gets_every_event_in_fewer_writes(
    server: RunningServer, connect: Any
) -> None:
    messages = await paced_delivery(connect)
    # 20 writes a second with no burst to speak of: 100 Sets on loopback take well
    # under two seconds, so the app's turns come far fewer than 100 times.
    assert messages <= WRITES // 2


@pytest.mark.settings(stream_writes_per_s=0)
async def test_with_no_budget_each_write_that_wakes_an_app_is_its_own_message(
    server: RunningServer, connect: Any
) -> None:
    """The same writes with the budget off (0): no turn waits, so a write that finds the
    app idle goes out on its own, as before the budget existed."""
    provider = await _add_key(connect)
    call = await _open_app(connect, "unpaced")
    await _write_one_by_one(provider)
    got, messages = await _events(call, WRITES)

    assert got == [(i + 1, i.to_bytes(2, "big")) for i in range(WRITES)]
    assert messages > WRITES // 2
    call.cancel()
