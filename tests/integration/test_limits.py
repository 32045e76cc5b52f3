"""Every limit is enforced with RESOURCE_EXHAUSTED naming it, and harms no other client."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import grpc
import pytest
from vmw.proto.ess.v1 import ess_pb2
from vmw.proto.vstore.v1 import vstore_pb2
from vmw.server.server import RunningServer

from tests.conftest import fails

Code = grpc.StatusCode


async def exhausted(call: Awaitable[Any], *fragments: str) -> None:
    await fails(call, Code.RESOURCE_EXHAUSTED, *fragments)


async def open_stream(s: Any) -> Any:
    call = s.events.GetEvents(
        ess_pb2.GetEventsRequest(
            queues=[ess_pb2.QueueConfig(queue=q, min_length=0, max_length=10) for q in range(3)]
        ),
        metadata=s.md,
    )
    await call.read()
    return call


@pytest.mark.settings(max_apps=2)
async def test_apps_with_open_streams_are_limited(server: RunningServer, connect: Any) -> None:
    calls = [await open_stream(connect(f"app{i}")) for i in range(2)]
    third = connect("app2")
    call = third.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=third.md)
    await exhausted(call.read(), "apps with open streams", "the limit is 2")
    again = await open_stream(connect("app0"))  # an app already in replaces its own stream
    assert "app0" in server.runtime.streams
    for c in [*calls, again]:
        c.cancel()


@pytest.mark.settings(max_subscriptions_per_app=2)
async def test_subscriptions_per_app_are_limited(server: RunningServer, connect: Any) -> None:
    s = connect("dash")
    names = ["Vehicle.A", "Vehicle.B", "Vehicle.C"]
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md)
    call = await open_stream(s)
    reg = s.events.Register
    await reg(
        ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key=n) for n in names[:2]]),
        metadata=s.md,
    )
    await reg(
        ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key="Vehicle.A", queue=1)]),
        metadata=s.md,
    )  # replacing one is not one more
    await exhausted(
        reg(
            ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key="Vehicle.C")]),
            metadata=s.md,
        ),
        "subscriptions",
        "would hold 3",
        "the limit is 2",
    )
    assert len(server.runtime.ess.subscriptions("dash")) == 2
    call.cancel()


@pytest.mark.settings(max_publish_streams_per_app=1)
async def test_publish_streams_per_app_are_limited(server: RunningServer, connect: Any) -> None:
    s = connect("prov")
    keys = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.A"]), metadata=s.md)
    update = vstore_pb2.PublishRequest(updates=[vstore_pb2.IdUpdate(id=keys.keys[0].id, data=b"1")])
    first = s.vstore.Publish(metadata=s.md)
    await first.write(update)
    second = s.vstore.Publish(metadata=s.md)
    await second.write(update)
    await exhausted(second, "Publish streams", "already has 1 open", "the limit is 1")
    await first.done_writing()
    assert (await first).batches == 1


@pytest.mark.settings(rate_limit_rps=5.0, rate_limit_burst=5)
async def test_the_request_rate_per_app_is_limited_without_harming_others(
    server: RunningServer, connect: Any
) -> None:
    greedy, polite = connect("greedy"), connect("polite")
    request = vstore_pb2.ListKeysRequest()
    for _ in range(5):
        await greedy.vstore.ListKeys(request, metadata=greedy.md)
    await exhausted(
        greedy.vstore.ListKeys(request, metadata=greedy.md),
        "rate limit",
        "more than 5 requests/s (burst 5)",
        "the limit is 5",
    )
    await polite.vstore.ListKeys(request, metadata=polite.md)  # its own bucket


@pytest.mark.settings(publish_messages_per_s=1.0, publish_burst=3)
async def test_messages_per_publish_stream_are_limited(server: RunningServer, connect: Any) -> None:
    s = connect("prov")
    keys = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.A"]), metadata=s.md)
    call = s.vstore.Publish(metadata=s.md)
    for i in range(4):
        await call.write(
            vstore_pb2.PublishRequest(
                updates=[vstore_pb2.IdUpdate(id=keys.keys[0].id, data=bytes([i]))]
            )
        )
    await exhausted(call, "Publish messages/s", "burst 3", "3 batches were written")
    assert server.runtime.store.get("Vehicle.A").data == b"\x02"


@pytest.mark.settings(max_message_bytes=64 * 1024 + 2048, max_value_size=64 * 1024)
async def test_messages_above_the_grpc_limit_are_refused(
    server: RunningServer, connect: Any
) -> None:
    s = connect("tool")
    names = [f"Vehicle.K{i}" for i in range(5000)]  # about 70 KiB of names
    await exhausted(
        s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md), "larger than max"
    )
    assert len(server.runtime.store) == 0
