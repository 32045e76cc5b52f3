"""Every bad input gets the right status code and a message naming the field and limit.

And changes nothing: the server's state checks pass after each.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.server.server import RunningServer

from tests.conftest import fails

Code = grpc.StatusCode


async def open_stream(stubs: Any, *queues: ess_pb2.QueueConfig) -> Any:
    call = stubs.events.GetEvents(ess_pb2.GetEventsRequest(queues=queues), metadata=stubs.md)
    return call, await call.read()


def check(server: RunningServer) -> None:
    server.runtime.store.check()
    server.runtime.ess.check()


async def test_missing_or_malformed_app_id_is_unauthenticated(
    server: RunningServer, connect: Any
) -> None:
    anonymous = connect(None)
    await fails(
        anonymous.events.GetSubscriptions(ess_pb2.GetSubscriptionsRequest()),
        Code.UNAUTHENTICATED,
        "missing 'app-id'",
    )
    await fails(
        anonymous.vstore.ListKeys(vstore_pb2.ListKeysRequest()),
        Code.UNAUTHENTICATED,
        "missing 'app-id'",
    )
    for bad in ("", "has space", "x" * 65, "semi;colon"):
        md = (("app-id", bad),)
        await fails(
            anonymous.events.GetSubscriptions(ess_pb2.GetSubscriptionsRequest(), metadata=md),
            Code.UNAUTHENTICATED,
            "app-id",
            "1 to 64 characters",
        )
    call = anonymous.events.GetEvents(ess_pb2.GetEventsRequest())
    await fails(call.read(), Code.UNAUTHENTICATED, "missing 'app-id'")
    assert server.runtime.ess.apps() == []


async def test_register_before_get_events_is_failed_precondition(
    server: RunningServer, connect: Any
) -> None:
    s = connect("early")
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.Speed"]), metadata=s.md)
    await fails(
        s.events.Register(
            ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key="Vehicle.Speed")]),
            metadata=s.md,
        ),
        Code.FAILED_PRECONDITION,
        "open it with GetEvents",
    )
    assert server.runtime.ess.watched_keys() == []


@pytest.mark.parametrize(
    ("queues", "fragments"),
    [
        (
            [ess_pb2.QueueConfig(queue=3, min_length=1, max_length=2)],
            ("queues[0].queue", "0, 1 and 2"),
        ),
        (
            [ess_pb2.QueueConfig(queue=0, min_length=5, max_length=4)],
            ("queues[0].min_length", "max_length (4)"),
        ),
        (
            [ess_pb2.QueueConfig(queue=1, min_length=0, max_length=0)],
            ("queues[0].max_length", "at least 1"),
        ),
        (
            [
                ess_pb2.QueueConfig(queue=1, max_length=5),
                ess_pb2.QueueConfig(queue=1, max_length=5),
            ],
            ("queues[1].queue", "more than once"),
        ),
    ],
)
async def test_bad_queue_configs_are_invalid_argument(
    server: RunningServer,
    connect: Any,
    queues: list[ess_pb2.QueueConfig],
    fragments: tuple[str, ...],
) -> None:
    s = connect("cfg")
    call = s.events.GetEvents(ess_pb2.GetEventsRequest(queues=queues), metadata=s.md)
    await fails(call.read(), Code.INVALID_ARGUMENT, *fragments)
    assert not server.runtime.ess.has_stream("cfg")
    check(server)


async def test_queue_max_length_is_capped_at_200(server: RunningServer, connect: Any) -> None:
    s = connect("big")
    call, first = await open_stream(s, ess_pb2.QueueConfig(queue=2, min_length=5, max_length=5000))
    q = first.events[0].started.queues
    assert [(c.queue, c.min_length, c.max_length) for c in q] == [
        (0, 10, 100),
        (1, 10, 100),
        (2, 5, 200),
    ]
    assert first.events[0].started.boot_id == server.runtime.boot_id
    call.cancel()


@pytest.mark.settings(event_budget=100, event_budget_per_app=1000)
async def test_a_reservation_beyond_the_budget_is_resource_exhausted(
    server: RunningServer, connect: Any
) -> None:
    s = connect("greedy")
    call = s.events.GetEvents(
        ess_pb2.GetEventsRequest(
            queues=[ess_pb2.QueueConfig(queue=0, min_length=200, max_length=200)]
        ),
        metadata=s.md,
    )
    await fails(
        call.read(), Code.RESOURCE_EXHAUSTED, "cannot reserve 220", "global event budget of 100"
    )
    assert server.runtime.ess.budget_free == 100


@pytest.mark.settings(max_keys_per_request=3, max_value_size=16)
async def test_request_shape_and_value_limits(server: RunningServer, connect: Any) -> None:
    s = connect("tool")
    v = s.vstore
    await fails(
        v.AddKeys(vstore_pb2.AddKeysRequest(), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "names: must not be empty",
    )
    await fails(
        v.AddKeys(vstore_pb2.AddKeysRequest(names=["A", "B", "C", "D"]), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "names: at most 3 per request, got 4",
    )
    await fails(
        v.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.Ok", "Vehicle..Bad"]), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "names[1]",
        "dot-separated",
    )
    assert len(server.runtime.store) == 0  # the valid name of the rejected request was not added
    await v.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.Ok"]), metadata=s.md)
    await fails(
        v.Set(
            vstore_pb2.SetRequest(updates=[vstore_pb2.Update(name="Vehicle.Ok", data=b"x" * 17)]),
            metadata=s.md,
        ),
        Code.INVALID_ARGUMENT,
        "updates[0]",
        "17 bytes; the limit is 16 bytes",
    )
    await fails(
        v.Set(
            vstore_pb2.SetRequest(
                updates=[
                    vstore_pb2.Update(name="Vehicle.Ok", data=b"1"),
                    vstore_pb2.Update(name="Vehicle.Nope", data=b"1"),
                ]
            ),
            metadata=s.md,
        ),
        Code.NOT_FOUND,
        "updates[1]",
        "'Vehicle.Nope' does not exist",
    )
    await fails(
        v.Set(vstore_pb2.SetRequest(updates=[vstore_pb2.Update(data=b"1")]), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "updates[0].key",
        "name or its id",
    )
    assert server.runtime.store.get("Vehicle.Ok").version == 0  # nothing of those was written
    await fails(
        v.Get(vstore_pb2.GetRequest(), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "names: must not be empty",
    )
    await fails(
        v.RemoveKeys(vstore_pb2.RemoveKeysRequest(), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "names: must not be empty",
    )
    call, _ = await open_stream(s)
    await fails(
        s.events.Register(ess_pb2.RegisterRequest(), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "subscriptions: must not be empty",
    )
    subs = [ess_pb2.Subscription(key=f"Vehicle.K{i}") for i in range(4)]
    await fails(
        s.events.Register(ess_pb2.RegisterRequest(subscriptions=subs), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "subscriptions: at most 3 per request, got 4",
    )
    await fails(
        s.events.Register(
            ess_pb2.RegisterRequest(
                subscriptions=[ess_pb2.Subscription(key="Vehicle.Ok", trigger=7)]
            ),
            metadata=s.md,
        ),
        Code.INVALID_ARGUMENT,
        "subscriptions[0].trigger",
        "unknown trigger 7",
    )
    await fails(
        s.events.Deregister(ess_pb2.DeregisterRequest(), metadata=s.md),
        Code.INVALID_ARGUMENT,
        "keys: must not be empty",
    )
    assert server.runtime.ess.watched_keys() == []
    call.cancel()
    check(server)


async def test_per_key_register_failures_do_not_fail_the_others(
    server: RunningServer, connect: Any
) -> None:
    s = connect("mixed")
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.Ok"]), metadata=s.md)
    call, _ = await open_stream(s)
    reply = await s.events.Register(
        ess_pb2.RegisterRequest(
            subscriptions=[
                ess_pb2.Subscription(key="bad name"),
                ess_pb2.Subscription(key="Vehicle.Ok", queue=9),
                ess_pb2.Subscription(key="Vehicle.Missing"),
                ess_pb2.Subscription(key="Vehicle.Ok"),
            ]
        ),
        metadata=s.md,
    )
    assert [(r.status, bool(r.detail)) for r in reply.results] == [
        (ess_pb2.STATUS_INVALID_ARGUMENT, True),
        (ess_pb2.STATUS_INVALID_ARGUMENT, True),
        (ess_pb2.STATUS_NOT_FOUND, True),
        (ess_pb2.STATUS_OK, False),
    ]
    assert "queue 9 does not exist" in reply.results[1].detail
    call.cancel()


@pytest.mark.settings(max_value_size=8)
async def test_a_malformed_publish_batch_ends_the_stream_naming_the_update(
    server: RunningServer, connect: Any
) -> None:
    s = connect("prov")
    keys = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.A"]), metadata=s.md)
    key = keys.keys[0].id
    call = s.vstore.Publish(metadata=s.md)
    await call.write(vstore_pb2.PublishRequest(updates=[vstore_pb2.IdUpdate(id=key, data=b"1")]))
    await call.write(
        vstore_pb2.PublishRequest(
            updates=[vstore_pb2.IdUpdate(id=key, data=b"2"), vstore_pb2.IdUpdate(id=999, data=b"3")]
        )
    )
    details = await fails(call, Code.NOT_FOUND, "updates[1]", "no key with id 999", "batch 1")
    assert "1 batches before it were written" in details
    assert server.runtime.store.get("Vehicle.A").data == b"1"
    call = s.vstore.Publish(metadata=s.md)
    await call.write(
        vstore_pb2.PublishRequest(updates=[vstore_pb2.IdUpdate(id=key, data=b"123456789")])
    )
    await fails(call, Code.INVALID_ARGUMENT, "updates[0]", "9 bytes; the limit is 8 bytes")
    call = s.vstore.Publish(metadata=s.md)
    await call.write(vstore_pb2.PublishRequest())
    await fails(call, Code.INVALID_ARGUMENT, "batch 0: updates: must not be empty")
    check(server)


async def test_compare_and_set_conflicts_are_reported_per_update(
    server: RunningServer, connect: Any
) -> None:
    s = connect("tool")
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.Door"]), metadata=s.md)
    reply = await s.vstore.Set(
        vstore_pb2.SetRequest(
            updates=[
                vstore_pb2.Update(name="Vehicle.Door", data=b"open", if_version=0),
                vstore_pb2.Update(name="Vehicle.Door", data=b"shut", if_version=0),
            ]
        ),
        metadata=s.md,
    )
    assert [(r.version, r.conflict) for r in reply.results] == [(1, False), (1, True)]
    got = await s.vstore.Get(
        vstore_pb2.GetRequest(names=["Vehicle.Door", "Vehicle.X"]), metadata=s.md
    )
    assert (got.values[0].data, got.values[0].version, list(got.not_found)) == (
        b"open",
        1,
        ["Vehicle.X"],
    )
