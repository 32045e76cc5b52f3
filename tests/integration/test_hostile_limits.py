"""The hostile-client table's limit rows: the same methods as :mod:`.test_hostile_table`
(enumerated from the running server's reflection), each limit per API and per transport.

What the limit rows promise, over TCP and over the Unix socket:

* Oversized batches: every repeated field of every request type (and of each message
  field one level down: a oneof's action such as ``OpenProviderStreamRequest``'s, a
  stream's ``open`` or ``claim``) is either a batch row of :data:`BATCHES` or exempt in
  :data:`NOT_A_BATCH` with its reason; a new repeated field fails
  :func:`test_every_repeated_field_of_every_request_is_a_batch_row_or_exempt` until it is
  classified. A batch one item over ``max_keys_per_request`` is refused
  INVALID_ARGUMENT (the project's error table: :class:`InvalidRequestError`, as
  :func:`vehicle_middleware.server.rpc.convert.check_count` says it) with ``<field>: at most <limit>
  per
  request, got <n>``, and nothing changes: the store's keys and values, the ESS's apps
  (KUKSA subscriptions included) and their subscriptions, and the actuators' providers.
* Oversized messages: a request over ``max_message_bytes`` (a valid message of the
  method's type, padded with an unknown field) to one unary and one stream method of
  each service (Admin has no stream; methods that answer UNIMPLEMENTED at once read
  nothing) is refused RESOURCE_EXHAUSTED by gRPC itself ("larger than max"), changes
  nothing, and another app on another connection is served right after each.
* Request rate per app: for each service (every one reflection lists), one cheap unary
  method: an app sending more than its burst at a rate too low to refill meanwhile is
  refused RESOURCE_EXHAUSTED naming its app, the rate and the burst, while another app on
  the same server is served; over the Unix socket too, where every caller shows the same
  peer and still has its own bucket. Counts, not latencies (the rate is 1/s: a refill
  while the calls run is counted, from their duration, as allowed).
* A large legal request does not shut others out: while a KUKSA v1 ``Get`` of a
  ``Vehicle.X.**`` wildcard over many keys, and a ``ListKeys`` scanning many keys its
  caller may not read (token mode), are in progress on the server, another app's cheap
  calls are answered; the large call's own answer shows the bystander's write, so the
  bystander was served after the large call began (the server tracked it) and before it
  ended (order, not timing).

* The shares of the event path: an app (the hog) at its share of the event budget's
  reservations, or of its stream slots, is refused RESOURCE_EXHAUSTED naming the share,
  its use and the limit on every API that opens an event stream (GetEvents, Events, KUKSA
  v1 and v2 Subscribe), and another app is admitted on every one; ``max_apps`` shares
  fit the budget, so every app holding its whole share is admitted.

* A burst of 2,000 unary calls at once on one connection gets no bare CANCELLED (gRPC's
  shedding, which a client cannot tell from its own cancellation), with the default
  bound on calls per connection and with a small one.

A defect found is a strict xfail naming it (none now; the first run found two: KUKSA
v2 ``SubscribeById``'s refusal named ``signal_paths`` for ``signal_ids``, and
``OpenProviderStream`` did not count ``provide_actuation_request.actuator_identifiers``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
from google.protobuf.message import Message
from vehicle_middleware.contract.values import encode
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2 as t1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2 as v1
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2 as act
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2 as adm
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2 as peer
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2 as ess
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as jnl
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2 as vs
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.config import StreamSettings
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually
from tests.integration.conftest import NewServer
from tests.integration.test_hostile_table import (
    ACTUATION,
    ADMIN,
    ESS,
    JOURNAL,
    PEER,
    TABLE,
    TIMEOUT_S,
    V1,
    V2,
    VSTORE,
    Answer,
    Metadata,
    Method,
    Requests,
    _requests_for,
    answered,
    served,
    state,
)

Code = grpc.StatusCode

LIMIT: Final = 5
"""``max_keys_per_request`` of the batch rows' server."""
OVER: Final = LIMIT + 1
DATA: Final = encode(7.0)
POINT: Final = t2.Datapoint(value=t2.Value(float=7.0))
TRANSPORTS: Final = ("tcp", "unix")


def _app(name: str) -> Metadata:
    return (("app-id", name),)


def _address(server: RunningServer, transport: str) -> str:
    address = server.address if transport == "tcp" else server.addresses[-1]
    assert address.startswith("unix:") == (transport == "unix"), server.addresses
    return address


async def _unary(channel: grpc.aio.Channel, full: str, request: Message, md: Metadata) -> Any:
    """One unary call by its ``service/method`` name; its response (or AioRpcError)."""
    call: Any = channel.unary_unary(
        f"/{full}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=_RESPONSES[full].FromString,
    )
    return await asyncio.wait_for(call(request, metadata=md), TIMEOUT_S)


_RESPONSES: Final[dict[str, type[Message]]] = {
    f"{VSTORE}/AddKeys": vs.AddKeysResponse,
    f"{VSTORE}/Set": vs.SetResponse,
    f"{VSTORE}/ListKeys": vs.ListKeysResponse,
    f"{ESS}/Register": ess.RegisterResponse,
    f"{ESS}/GetSubscriptions": ess.GetSubscriptionsResponse,
    f"{ACTUATION}/Actuate": act.ActuateResponse,
    f"{ADMIN}/GetStats": adm.Stats,
    f"{JOURNAL}/ListConsumers": jnl.ListConsumersResponse,
    f"{PEER}/Status": peer.StatusResponse,
    f"{V1}/Get": v1.GetResponse,
    f"{V1}/GetServerInfo": v1.GetServerInfoResponse,
    f"{V2}/GetServerInfo": v2.GetServerInfoResponse,
}


async def _methods(channel: grpc.aio.Channel) -> dict[str, Method]:
    return {m.full: m for m in await served(channel)}


# -- oversized batches: the rows ------------------------------------------------------


@dataclass(frozen=True)
class Items:
    """The keys a batch row names, :data:`OVER` of each kind."""

    subscribed: list[str]
    """Existing keys, with values, the batching app is subscribed to."""
    ids: list[int]
    """Their ids."""
    others: list[str]
    """Existing keys, with values, nobody is subscribed to."""
    fresh: list[str]
    """Names no key has."""


@dataclass(frozen=True)
class Batch:
    """One oversized-batch row: the requests naming :data:`OVER` items in the field."""

    build: Callable[[Items], Requests]
    defect: str = ""
    """Non-empty: the server does not refuse it as promised: a strict xfail saying so."""


def _v1_update(path: str) -> v1.EntryUpdate:
    entry = t1.DataEntry(path=path, value=t1.Datapoint(float=7.0))
    return v1.EntryUpdate(entry=entry, fields=[t1.FIELD_VALUE])


def _v2_actuate(path: str) -> v2.ActuateRequest:
    return v2.ActuateRequest(signal_id=t2.SignalID(path=path), value=t2.Value(float=7.0))


BATCHES: Final[dict[tuple[str, str], Batch]] = {
    (f"{VSTORE}/AddKeys", "names"): Batch(lambda k: [vs.AddKeysRequest(names=k.fresh)]),
    (f"{VSTORE}/RemoveKeys", "names"): Batch(lambda k: [vs.RemoveKeysRequest(names=k.subscribed)]),
    (f"{VSTORE}/Set", "updates"): Batch(
        lambda k: [vs.SetRequest(updates=[vs.Update(name=n, data=DATA) for n in k.subscribed])]
    ),
    (f"{VSTORE}/Publish", "updates"): Batch(
        lambda k: [vs.PublishRequest(updates=[vs.IdUpdate(id=i, data=DATA) for i in k.ids])]
    ),
    (f"{VSTORE}/Get", "names"): Batch(lambda k: [vs.GetRequest(names=k.subscribed)]),
    (f"{VSTORE}/WatchDemand", "names"): Batch(
        lambda k: [vs.WatchDemandRequest(names=k.subscribed)]
    ),
    (f"{ESS}/Register", "subscriptions"): Batch(
        lambda k: [ess.RegisterRequest(subscriptions=[ess.Subscription(key=n) for n in k.others])]
    ),
    (f"{ESS}/Deregister", "keys"): Batch(lambda k: [ess.DeregisterRequest(keys=k.subscribed)]),
    (f"{ACTUATION}/Actuate", "targets"): Batch(
        lambda k: [act.ActuateRequest(targets=[act.Target(name=n, data=DATA) for n in k.others])]
    ),
    (f"{ACTUATION}/ProvideActuators", "claim.names"): Batch(
        lambda k: [act.ProviderMessage(claim=act.Claim(names=k.subscribed))]
    ),
    (f"{ADMIN}/GetStats", "keys"): Batch(lambda k: [adm.GetStatsRequest(keys=k.subscribed)]),
    (f"{V1}/Get", "entries"): Batch(
        lambda k: [v1.GetRequest(entries=[v1.EntryRequest(path=n) for n in k.subscribed])]
    ),
    (f"{V1}/Set", "updates"): Batch(
        lambda k: [v1.SetRequest(updates=[_v1_update(n) for n in k.subscribed])]
    ),
    (f"{V1}/Subscribe", "entries"): Batch(
        lambda k: [v1.SubscribeRequest(entries=[v1.SubscribeEntry(path=n) for n in k.others])]
    ),
    (f"{V2}/GetValues", "signal_ids"): Batch(
        lambda k: [v2.GetValuesRequest(signal_ids=[t2.SignalID(id=i) for i in k.ids])]
    ),
    (f"{V2}/Subscribe", "signal_paths"): Batch(
        lambda k: [v2.SubscribeRequest(signal_paths=k.others)]
    ),
    (f"{V2}/SubscribeById", "signal_ids"): Batch(
        lambda k: [v2.SubscribeByIdRequest(signal_ids=k.ids)],
    ),
    (f"{V2}/BatchActuate", "actuate_requests"): Batch(
        lambda k: [v2.BatchActuateRequest(actuate_requests=[_v2_actuate(n) for n in k.others])]
    ),
    (f"{V2}/OpenProviderStream", "publish_values_request.data_points"): Batch(
        lambda k: [
            v2.OpenProviderStreamRequest(
                publish_values_request=v2.PublishValuesRequest(
                    request_id=1, data_points={i: POINT for i in k.ids}
                )
            )
        ]
    ),
    (f"{V2}/OpenProviderStream", "provide_signal_request.signals_sample_intervals"): Batch(
        lambda k: [
            v2.OpenProviderStreamRequest(
                provide_signal_request=v2.ProvideSignalRequest(
                    signals_sample_intervals={i: t2.SampleInterval(interval_ms=10) for i in k.ids}
                )
            )
        ]
    ),
    (f"{V2}/OpenProviderStream", "provide_actuation_request.actuator_identifiers"): Batch(
        lambda k: [
            v2.OpenProviderStreamRequest(
                provide_actuation_request=v2.ProvideActuationRequest(
                    actuator_identifiers=[t2.SignalID(id=i) for i in k.ids]
                )
            )
        ],
    ),
}
"""Every repeated field that names keys (names, ids, paths, updates, subscriptions,
targets), by ``(service/method, field path)``."""

_PEER_PROTOCOL: Final = (
    "the peer protocol between the vehicle's own nodes (a listed node with the peer "
    "scope only): bounded by max_message_bytes (an event by a quarter of it) and the "
    "cluster limits, not by max_keys_per_request"
)
_QUEUES: Final = (
    "queue configurations: one per queue 0..2, a queue given twice or one outside 0..2 "
    "is refused (vehicle_middleware.ess.config)"
)
_KINDS: Final = (
    "record kinds the answer is filtered by: each checked against the journal's kinds, "
    "a set; it names no key"
)

NOT_A_BATCH: Final[dict[tuple[str, str], str]] = {
    (f"{ESS}/GetEvents", "queues"): _QUEUES,
    (f"{ESS}/Events", "open.queues"): _QUEUES,
    (f"{JOURNAL}/Poll", "want"): _KINDS,
    (f"{JOURNAL}/Follow", "start.want"): _KINDS,
    **{
        (f"{PEER}/Link", path): _PEER_PROTOCOL
        for path in (
            "welcome.leaves",
            "state.keys",
            "horizons",
            "events",
            "inv.leaves",
            "get_data",
            "sync.leaves",
        )
    },
    (f"{V1}/StreamedUpdate", "updates"): "the method is UNIMPLEMENTED: nothing is read",
    (f"{V2}/OpenProviderStream", "get_provider_value_response.entries"): (
        "not read: the middleware never asks a provider for values"
    ),
}
"""Repeated fields that are no batch of keys, with the reason."""


def repeated_fields(message: type[Message]) -> list[str]:
    """The repeated fields (maps too) of a request type, and those of each of its
    singular message fields (one level: a oneof's actions, a stream's ``open``)."""
    found: list[str] = []
    for f in message.DESCRIPTOR.fields:
        if f.is_repeated:
            found.append(f.name)
        elif f.message_type is not None:
            found.extend(f"{f.name}.{g.name}" for g in f.message_type.fields if g.is_repeated)
    return found


def _count(message: Message, path: str) -> int:
    """The items of the (repeated) field at ``path`` of ``message``."""
    value: Any = message
    for part in path.split("."):
        value = getattr(value, part)
    return len(value)


def _ids(table: dict[tuple[str, str], Any]) -> list[str]:
    return [f"{'.'.join(full.split('.')[-2:])}-{path}" for full, path in table]


BATCH_ROWS: Final = [
    pytest.param(
        full,
        path,
        id=label,
        marks=[pytest.mark.xfail(strict=True, reason=row.defect)] if row.defect else [],
    )
    for ((full, path), row), label in zip(BATCHES.items(), _ids(BATCHES), strict=True)
]


# -- oversized batches: the server ----------------------------------------------------


@dataclass(frozen=True)
class Batching:
    server: RunningServer
    items: Items


BATCHER: Final = "batcher"


@pytest.fixture
async def batching(new_server: NewServer, tmp_path: Path) -> AsyncIterator[Batching]:
    """An open-mode middleware with ``max_keys_per_request`` :data:`LIMIT`, its journal
    on (every service live), on TCP and a Unix socket; :data:`BATCHER`'s event stream
    open and subscribed to ``items.subscribed``; every key with a value."""
    running = await new_server(
        max_keys_per_request=LIMIT,
        journal_dir=str(tmp_path / "journal"),
        unix_socket=str(tmp_path / "vehicle_middleware.sock"),
    )
    subscribed = [f"Vehicle.Batch.S{i}" for i in range(OVER)]
    others = [f"Vehicle.Batch.O{i}" for i in range(OVER)]
    md = _app(BATCHER)
    async with grpc.aio.insecure_channel(running.address) as channel:
        ids: list[int] = []
        for names in (subscribed, others):
            for part in (names[:LIMIT], names[LIMIT:]):
                added = await _unary(
                    channel, f"{VSTORE}/AddKeys", vs.AddKeysRequest(names=part), md
                )
                ids.extend(k.id for k in added.keys)
                updates = [vs.Update(name=n, data=encode(1.0)) for n in part]
                await _unary(channel, f"{VSTORE}/Set", vs.SetRequest(updates=updates), md)
        events: Any = channel.unary_stream(
            f"/{ESS}/GetEvents",
            request_serializer=ess.GetEventsRequest.SerializeToString,
            response_deserializer=ess.EventBatch.FromString,
        )(ess.GetEventsRequest(), metadata=md)
        try:
            await asyncio.wait_for(events.read(), TIMEOUT_S)  # StreamStarted
            for part in (subscribed[:LIMIT], subscribed[LIMIT:]):
                subs = [ess.Subscription(key=n) for n in part]
                await _unary(
                    channel, f"{ESS}/Register", ess.RegisterRequest(subscriptions=subs), md
                )
            assert len(running.runtime.ess.subscriptions(BATCHER)) == OVER
            yield Batching(
                running,
                Items(subscribed, ids[:OVER], others, [f"Vehicle.Batch.N{i}" for i in range(OVER)]),
            )
        finally:
            events.cancel()


async def _claimable(channel: grpc.aio.Channel, names: list[str]) -> Answer:
    """Whether another app may provide these actuators now (none claimed them): its
    claim's first answer (``claimed``: yes; ALREADY_EXISTS: another stream has one)."""
    claim: Any = channel.stream_stream(
        f"/{ACTUATION}/ProvideActuators",
        request_serializer=act.ProviderMessage.SerializeToString,
        response_deserializer=act.ProviderInstruction.FromString,
    )(metadata=_app("claim-probe"))
    try:
        await claim.write(act.ProviderMessage(claim=act.Claim(names=names)))
        first = await asyncio.wait_for(claim.read(), TIMEOUT_S)
        if first is grpc.aio.EOF:
            return Answer(await claim.code(), await claim.details() or "")
        return Answer(Code.OK, "", first)
    except grpc.aio.AioRpcError as e:
        return Answer(e.code(), e.details() or "")
    finally:
        claim.cancel()


# -- oversized batches: the tests ------------------------------------------------------


async def test_every_repeated_field_of_every_request_is_a_batch_row_or_exempt(
    batching: Batching,
) -> None:
    """Every method the server's reflection lists, every repeated field of its request
    (and one level down): classified, and nothing classified that no request has."""
    async with grpc.aio.insecure_channel(batching.server.address) as channel:
        methods = await served(channel)
    found = {(m.full, path) for m in methods for path in repeated_fields(m.input)}
    assert {m.full for m in methods} == set(TABLE)
    rows, exempt = set(BATCHES), set(NOT_A_BATCH)
    assert not rows & exempt, f"both a batch row and exempt: {sorted(rows & exempt)}"
    unclassified = sorted(found - rows - exempt)
    assert not unclassified, (
        "repeated request fields neither in BATCHES (a batch: an oversized row) nor in "
        f"NOT_A_BATCH (with the reason): {unclassified}"
    )
    stale = sorted((rows | exempt) - found)
    assert not stale, f"classified, but no request has them: {stale}"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("full", "path"), BATCH_ROWS)
async def test_a_batch_one_over_the_limit_is_refused_naming_it_and_changes_nothing(
    batching: Batching, full: str, path: str, transport: str
) -> None:
    """:data:`OVER` items in the row's field, from :data:`BATCHER` (whose event stream is
    open: the request would be served but for its size); the state is compared while the
    call is still open, and another app must still be able to claim the actuators."""
    server, items = batching.server, batching.items
    requests = BATCHES[full, path].build(items)
    assert _count(requests[0], path) == OVER
    before = state(server)
    async with grpc.aio.insecure_channel(_address(server, transport)) as channel:
        method = (await _methods(channel))[full]
        async with answered(channel, method, requests, _app(BATCHER)) as got:
            after = state(server)  # the call still open: a stream's effect is still there
            claim = await _claimable(channel, items.subscribed[:LIMIT])
    wrong = []
    says = f"{path}: at most {LIMIT} per request, got {OVER}"
    if got.code != Code.INVALID_ARGUMENT or says not in got.details:
        wrong.append(f"answered {got.text()}; expected INVALID_ARGUMENT saying {says!r}")
    if after != before:
        wrong.append("changed the store or the ESS's apps and subscriptions")
    if claim.code != Code.OK:
        wrong.append(f"claimed actuators: another app's claim got {claim.text()}")
    assert not wrong, f"{full} with {OVER} {path} over {transport}:\n" + "\n".join(wrong)


# -- oversized messages -----------------------------------------------------------------

MAX_MESSAGE: Final = 64 * 1024


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


PADDING: Final = _varint((536_870_911 << 3) | 2) + _varint(MAX_MESSAGE) + b"\0" * MAX_MESSAGE
"""An unknown length-delimited field (the highest field number) of :data:`MAX_MESSAGE`
bytes: appended to a valid request, a valid message (unknown fields are kept) over the
limit, whatever its type."""


def _oversized(request: Message) -> bytes:
    return request.SerializeToString() + PADDING


def _unary_and_stream(methods: list[Method]) -> dict[str, list[Method]]:
    """Of each service, its first unary method and its first stream method (of either
    direction) that the middleware implements: a method that answers UNIMPLEMENTED at
    once reads nothing (its answer races the message)."""
    chosen: dict[str, list[Method]] = {}
    for m in methods:
        row = TABLE[m.full]
        if row.keyless is not None and row.keyless.code == Code.UNIMPLEMENTED:
            continue
        streaming = m.client_streaming or m.server_streaming
        picked = chosen.setdefault(m.service, [])
        if all((p.client_streaming or p.server_streaming) != streaming for p in picked):
            picked.append(m)
    return chosen


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_message_over_max_message_bytes_is_refused_by_grpc_on_each_service(
    new_server: NewServer, tmp_path: Path, transport: str
) -> None:
    """One unary and one stream method of each service (Admin has no stream)."""
    server = await new_server(
        max_message_bytes=MAX_MESSAGE,
        max_value_size=16 * 1024,
        journal_dir=str(tmp_path / "journal"),
        unix_socket=str(tmp_path / "vehicle_middleware.sock"),
    )
    md = _app("big")
    async with (
        grpc.aio.insecure_channel(_address(server, transport)) as channel,
        grpc.aio.insecure_channel(_address(server, transport)) as others,
    ):
        add = vs.AddKeysRequest(names=["Vehicle.Hidden.Secret"])
        existing = (await _unary(others, f"{VSTORE}/AddKeys", add, _app("setup"))).keys[0].id
        chosen = _unary_and_stream(await served(channel))
        assert {s: len(ms) for s, ms in chosen.items()} == {
            s: 1 if s == ADMIN else 2
            for s in (VSTORE, ESS, ACTUATION, ADMIN, JOURNAL, PEER, V1, V2)
        }
        before = state(server)
        wrong: list[str] = []
        for method in (m for ms in chosen.values() for m in ms):
            requests = _requests_for(method, existing)
            assert len(_oversized(requests[0])) > MAX_MESSAGE
            async with answered(channel, method, requests, md, _oversized) as got:
                if got.code != Code.RESOURCE_EXHAUSTED or "larger than max" not in got.details:
                    wrong.append(f"{method.full}: {got.text()}")
            try:  # another app, on another connection, is served right after
                await _unary(others, f"{VSTORE}/ListKeys", vs.ListKeysRequest(limit=1), _app("b"))
            except grpc.aio.AioRpcError as e:
                wrong.append(f"after {method.full}: another app got {e.code().name}: {e.details()}")
        assert state(server) == before, "an oversized request changed something"
    assert not wrong, f"over {transport}:\n" + "\n".join(wrong)


# -- request rate per app ---------------------------------------------------------------

RATE: Final = 1.0
"""Requests/s refilled (the least the settings allow): the test's calls take well
under a second, so hardly a request is refilled while it runs (and that is counted)."""
BURST: Final = 5
EXTRA: Final = 5
OWN_CONNECTION: Final = (("grpc.use_local_subchannel_pool", 1),)
"""A channel with a connection of its own: channels of one process to one address
share one connection otherwise (and its limit: the TCP peer's)."""


@dataclass(frozen=True)
class Cheap:
    """A cheap unary call of one service, and how the middleware answers it when the
    rate limit lets it through."""

    method: str
    request: Callable[[], Message]
    code: Code = Code.OK


CHEAP: Final[dict[str, Cheap]] = {
    VSTORE: Cheap("ListKeys", lambda: vs.ListKeysRequest(limit=1)),
    ESS: Cheap("GetSubscriptions", ess.GetSubscriptionsRequest),
    ACTUATION: Cheap(  # its only unary method: an actuator no key is, refused by name
        "Actuate",
        lambda: act.ActuateRequest(targets=[act.Target(name="Vehicle.Nowhere", data=DATA)]),
        Code.NOT_FOUND,
    ),
    ADMIN: Cheap("GetStats", adm.GetStatsRequest),
    JOURNAL: Cheap("ListConsumers", jnl.ListConsumersRequest),
    PEER: Cheap("Status", peer.StatusRequest),
    V1: Cheap("GetServerInfo", v1.GetServerInfoRequest),
    V2: Cheap("GetServerInfo", v2.GetServerInfoRequest),
}
"""One cheap unary method of every service with callers."""


async def _answer(channel: grpc.aio.Channel, full: str, request: Message, md: Metadata) -> Answer:
    try:
        return Answer(Code.OK, "", await _unary(channel, full, request, md))
    except grpc.aio.AioRpcError as e:
        return Answer(e.code(), e.details() or "")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_each_app_has_its_own_request_rate_on_every_service(
    new_server: NewServer, tmp_path: Path, transport: str
) -> None:
    """For each service: an app sending its burst and :data:`EXTRA` more calls back to
    back is refused past its burst (RESOURCE_EXHAUSTED naming the app, the rate and the
    burst), and another app is served meanwhile. Over TCP each app has its own connection
    (a connection has a limit too: twice an app's, shared by the apps on it); over the
    Unix socket, where every caller shows the same peer, they share one connection and
    still not one bucket."""
    server = await new_server(
        rate_limit_rps=RATE,
        rate_limit_burst=BURST,
        journal_dir=str(tmp_path / "journal"),
        unix_socket=str(tmp_path / "vehicle_middleware.sock"),
    )
    address = _address(server, transport)
    async with grpc.aio.insecure_channel(address) as listing:
        services = {m.service for m in await served(listing)}
    assert services == set(CHEAP), "every service has a cheap unary method in CHEAP"
    wrong: list[str] = []
    for service, cheap in CHEAP.items():
        full = f"{service}/{cheap.method}"
        greedy, polite = f"greedy.{service}", f"polite.{service}"
        async with (
            grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as mine,
            grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as theirs,
        ):
            other = theirs if transport == "tcp" else mine
            start = time.monotonic()
            answers = [
                await _answer(mine, full, cheap.request(), _app(greedy))
                for _ in range(BURST + EXTRA)
            ]
            refilled = int((time.monotonic() - start) * RATE)
            bystander = await _answer(other, full, cheap.request(), _app(polite))
        served_ = [a for a in answers if a.code == cheap.code]
        refused = [a for a in answers if a.code == Code.RESOURCE_EXHAUSTED]
        says = (
            f"rate limit: app {greedy!r} sent more than {RATE:g} requests/s (burst {BURST})",
            f"the limit is {RATE:g}",
        )
        if answers[:BURST] != served_[:BURST] or len(served_) + len(refused) != len(answers):
            wrong.append(f"{full}: {[a.text() for a in answers]}")
        elif not BURST <= len(served_) <= BURST + refilled or len(refused) < EXTRA - refilled:
            wrong.append(f"{full}: {len(served_)} served, {len(refused)} refused")
        elif any(not all(s in a.details for s in says) for a in refused):
            wrong.append(f"{full}: refused as {refused[0].details!r}, expected {says}")
        if bystander.code != cheap.code:
            wrong.append(f"{full}: another app got {bystander.text()}")
    assert not wrong, f"over {transport}:\n" + "\n".join(wrong)


# -- a large legal request and a bystander ----------------------------------------------

WIDE: Final = 20_000
"""Keys under ``Vehicle.X``: a wildcard over them is legal (its answer, about 0.5 MB,
fits) and large: about 20 pauses (every PAUSE_EVERY keys), where the bystander's two
calls need one or two (5,000 keys left about 3 spare pauses on a 2-core machine; 20,000
leave about 20, for about 0.3 s of test)."""


async def _add_wide(channel: grpc.aio.Channel, md: Metadata, count: int = WIDE) -> list[str]:
    names = [f"Vehicle.X.K{i:05d}" for i in range(count)]
    for at in range(0, count, 1_000):
        await _unary(
            channel, f"{VSTORE}/AddKeys", vs.AddKeysRequest(names=names[at : at + 1_000]), md
        )
    return names


async def _in_progress(server: RunningServer, large: Any, what: str) -> None:
    """Wait until the server is handling a call (the only one: ``large``), and fail if
    ``large`` finished first: it is too small to watch on this machine."""
    calls = server.calls
    assert calls is not None
    await eventually(lambda: calls.count > 0 or large.done(), timeout=TIMEOUT_S, poll=0.001)
    assert not large.done(), f"{what} finished before it could be seen in progress"


async def test_a_bystander_is_served_while_a_wide_kuksa_get_is_in_progress(
    new_server: NewServer,
) -> None:
    """KUKSA v1 ``Get`` of ``Vehicle.X.**`` over :data:`WIDE` keys (open mode): once the
    server is handling it, another app's ``ListKeys`` and ``Set`` are answered before it
    ends, and its answer has the first key's value from before that ``Set`` and the last
    key's from after it: the bystander was served in the middle of it."""
    server = await new_server()
    calls = server.calls
    assert calls is not None
    wide, bystander = _app("wide"), _app("bystander")
    async with (
        grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as channel,
        grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as other,
    ):
        names = await _add_wide(channel, wide)
        first, last = names[0], names[-1]
        updates = [vs.Update(name=n, data=encode(1.0)) for n in (first, last)]
        await _unary(channel, f"{VSTORE}/Set", vs.SetRequest(updates=updates), wide)
        await eventually(lambda: calls.count == 0, timeout=TIMEOUT_S, what="no call in progress")
        get: Any = channel.unary_unary(
            f"/{V1}/Get",
            request_serializer=v1.GetRequest.SerializeToString,
            response_deserializer=v1.GetResponse.FromString,
        )
        large = get(v1.GetRequest(entries=[v1.EntryRequest(path="Vehicle.X.**")]), metadata=wide)
        await _in_progress(server, large, "the wide Get")
        listed = await _unary(other, f"{VSTORE}/ListKeys", vs.ListKeysRequest(limit=1), bystander)
        listed_first = not large.done()
        write = vs.SetRequest(updates=[vs.Update(name=last, data=encode(2.0))])
        await _unary(other, f"{VSTORE}/Set", write, bystander)
        written_first = not large.done()
        response = await large
    assert listed_first, "the bystander's ListKeys was answered after the wide Get"
    assert written_first, "the bystander's Set was answered after the wide Get"
    assert [k.name for k in listed.keys] == [first]
    got = {e.path: e.value.double for e in response.entries}
    assert len(got) == WIDE, response.error
    assert (got[first], got[last]) == (1.0, 2.0), "the bystander's Set was not in the middle"


@dataclass(frozen=True)
class TokenKeys:
    private: bytes
    public: bytes

    def md(self, subject: str, scope: str) -> Metadata:
        token = mint(self.private, subject=subject, scope=scope, ttl_s=600, audience=AUD)
        return (("authorization", f"Bearer {token}"),)


AUD: Final = "vmw-hostile-limits"


async def test_a_bystander_is_served_while_a_listing_scans_keys_its_caller_may_not_read(
    new_server: NewServer, tmp_path: Path
) -> None:
    """Token mode: ``ListKeys`` of ``Vehicle.X`` by an app that may read only
    ``Vehicle.X.Zlate`` scans :data:`WIDE` keys it may not read; once the server is
    handling it, another app's ``ListKeys`` and ``AddKeys`` (of ``Vehicle.X.Zlate``)
    are answered before it ends, and its page holds the key that ``AddKeys`` added
    (the scan had not reached it yet): the bystander was served in the middle of it."""
    private, public = generate_key_pair("ES256")
    tokens = TokenKeys(private, public)
    pub = tmp_path / "vehicle_middleware.pub"
    pub.write_bytes(public)
    server = await new_server(auth_mode="token", token_public_key=str(pub), token_audience=AUD)
    calls = server.calls
    assert calls is not None
    late = "Vehicle.X.Zlate"
    lister = tokens.md("lister", f"read:{late}")
    bystander = tokens.md("bystander", "read create")
    async with (
        grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as channel,
        grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as other,
    ):
        names = await _add_wide(other, bystander)
        await eventually(lambda: calls.count == 0, timeout=TIMEOUT_S, what="no call in progress")
        list_keys: Any = channel.unary_unary(
            f"/{VSTORE}/ListKeys",
            request_serializer=vs.ListKeysRequest.SerializeToString,
            response_deserializer=vs.ListKeysResponse.FromString,
        )
        large = list_keys(vs.ListKeysRequest(prefix="Vehicle.X", limit=1), metadata=lister)
        await _in_progress(server, large, "the scanning ListKeys")
        listed = await _unary(other, f"{VSTORE}/ListKeys", vs.ListKeysRequest(limit=1), bystander)
        listed_first = not large.done()
        await _unary(other, f"{VSTORE}/AddKeys", vs.AddKeysRequest(names=[late]), bystander)
        added_first = not large.done()
        response = await large
    assert listed_first, "the bystander's ListKeys was answered after the scanning one"
    assert added_first, "the bystander's AddKeys was answered after the scanning ListKeys"
    assert [k.name for k in listed.keys] == [names[0]]
    assert [k.name for k in response.keys] == [late], (
        "the bystander's AddKeys was not in the middle"
    )


# -- the shares of the event path ----------------------------------------------------------
#
# Every resource of the event path that all apps share has a per-app share, counted the
# same way on every API that opens an event stream: the own GetEvents and Events, KUKSA
# v1 and v2 Subscribe. A row fills one share of one app (the hog), then: the hog's next
# stream is refused RESOURCE_EXHAUSTED naming the share, its use and the limit, on every
# API; another app is admitted on every API.

SHARE: Final = StreamSettings().event_budget_per_app
"""The default ``event_budget_per_app``: the ``min_length`` values an app's streams
reserve, all together (a KUKSA subscription reserves its queue 0's, 10 by default)."""
Opener = Callable[[grpc.aio.Channel, Metadata, str, int], Any]
"""Opens one event stream of the app (metadata) subscribed to a key, reserving a number
of queued events; returns its call, whose first message says it was admitted."""


def _own_queues(reserve: int) -> list[ess.QueueConfig]:
    """Queues reserving ``reserve`` in all (at least 2: queues 1 and 2 reserve 1 each)."""
    return [
        ess.QueueConfig(queue=0, min_length=reserve - 2, max_length=200),
        ess.QueueConfig(queue=1, min_length=1, max_length=10),
        ess.QueueConfig(queue=2, min_length=1, max_length=10),
    ]


def _get_events(channel: grpc.aio.Channel, md: Metadata, key: str, reserve: int) -> Any:
    call: Any = channel.unary_stream(
        f"/{ESS}/GetEvents",
        request_serializer=ess.GetEventsRequest.SerializeToString,
        response_deserializer=ess.EventBatch.FromString,
    )
    return call(ess.GetEventsRequest(queues=_own_queues(reserve)), metadata=md)


async def _events_requests(reserve: int) -> AsyncIterator[ess.EventsRequest]:
    yield ess.EventsRequest(open=ess.OpenEvents(queues=_own_queues(reserve)))
    await asyncio.Event().wait()  # hold the stream open; the call's cancel ends it


def _events(channel: grpc.aio.Channel, md: Metadata, key: str, reserve: int) -> Any:
    call: Any = channel.stream_stream(
        f"/{ESS}/Events",
        request_serializer=ess.EventsRequest.SerializeToString,
        response_deserializer=ess.EventBatch.FromString,
    )
    return call(_events_requests(reserve), metadata=md)


def _v1_subscribe(channel: grpc.aio.Channel, md: Metadata, key: str, reserve: int) -> Any:
    assert reserve == 10, "a v1 subscription reserves 10 (its buffer is the default 100)"
    call: Any = channel.unary_stream(
        f"/{V1}/Subscribe",
        request_serializer=v1.SubscribeRequest.SerializeToString,
        response_deserializer=v1.SubscribeResponse.FromString,
    )
    request = v1.SubscribeRequest(entries=[v1.SubscribeEntry(path=key)])
    return call(request, metadata=md)


def _v2_subscribe(channel: grpc.aio.Channel, md: Metadata, key: str, reserve: int) -> Any:
    call: Any = channel.unary_stream(
        f"/{V2}/Subscribe",
        request_serializer=v2.SubscribeRequest.SerializeToString,
        response_deserializer=v2.SubscribeResponse.FromString,
    )
    request = v2.SubscribeRequest(signal_paths=[key], buffer_size=reserve)
    return call(request, metadata=md)


OPENERS: Final[dict[str, Opener]] = {
    "GetEvents": _get_events,
    "Events": _events,
    "v1.Subscribe": _v1_subscribe,
    "v2.Subscribe": _v2_subscribe,
}
OWN: Final = ("GetEvents", "Events")
"""The app's own stream: one per app, a newer one replaces the older."""
SHARE_KEYS: Final = tuple(f"Vehicle.Share.K{i}" for i in range(20))


async def _add_share_keys(channel: grpc.aio.Channel) -> None:
    """The keys the rows subscribe to, each with a value (a KUKSA subscription's first
    message carries the current values: it is the sign of admission)."""
    md = _app("adder")
    await _unary(channel, f"{VSTORE}/AddKeys", vs.AddKeysRequest(names=SHARE_KEYS), md)
    updates = [vs.Update(name=n, data=DATA) for n in SHARE_KEYS]
    await _unary(channel, f"{VSTORE}/Set", vs.SetRequest(updates=updates), md)


async def _admitted(call: Any) -> None:
    await asyncio.wait_for(call.read(), TIMEOUT_S)


async def _refusal(call: Any) -> grpc.aio.AioRpcError | None:
    """The call's refusal, or None: its first message came (it was admitted)."""
    try:
        await asyncio.wait_for(call.read(), TIMEOUT_S)
    except grpc.aio.AioRpcError as e:
        return e
    return None


async def _refused(call: Any, *fragments: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await asyncio.wait_for(call.read(), TIMEOUT_S)
    details = err.value.details() or ""
    assert err.value.code() == Code.RESOURCE_EXHAUSTED, details
    for fragment in fragments:
        assert fragment in details, details
    return details


async def _bystander_admitted_on_every_api(channel: grpc.aio.Channel, app: str) -> None:
    """``app`` opens its own stream (default reservations, 30) and one KUKSA subscription
    of each version (10 each): 50, within its share, admitted on every API."""
    md = _app(app)
    opened = []
    try:
        for api in ("GetEvents", "v1.Subscribe", "v2.Subscribe"):
            reserve = 30 if api in OWN else 10
            call = OPENERS[api](channel, md, SHARE_KEYS[0], reserve)
            opened.append(call)
            await _admitted(call)
        events = OPENERS["Events"](channel, md, SHARE_KEYS[0], 30)  # replaces GetEvents
        opened.append(events)
        await _admitted(events)
    finally:
        for call in opened:
            call.cancel()


@pytest.mark.parametrize("api", list(OPENERS))
async def test_an_app_at_its_event_budget_share_is_refused_on_every_api_and_others_admitted(
    new_server: NewServer, api: str
) -> None:
    """The hog's own stream and two KUKSA subscriptions reserve its whole share (SHARE - 20,
    10 and 10); one more reservation through ``api`` is refused naming the share, the hog's
    use and the limit, and nothing of it stays; another app gets in on every API."""
    server = await new_server()
    hog = _app("hog")
    async with grpc.aio.insecure_channel(server.address) as channel:
        await _add_share_keys(channel)
        held = [
            _get_events(channel, hog, SHARE_KEYS[0], SHARE - 20),
            _v1_subscribe(channel, hog, SHARE_KEYS[1], 10),
            _v2_subscribe(channel, hog, SHARE_KEYS[2], 10),
        ]
        for call in held:
            await _admitted(call)
        before = state(server)
        # A new own stream replaces the old one: it gives back SHARE - 20, asks for one more.
        over = OPENERS[api](channel, hog, SHARE_KEYS[3], SHARE - 19 if api in OWN else 10)
        own = "reserves 20 queued events on its other streams"
        used = own if api in OWN else f"reserves {SHARE}"
        await _refused(over, "event budget per app", "app 'hog'", used, f"the limit is {SHARE}")
        assert state(server) == before
        assert len(server.runtime.streams.streams_of("hog")) == 3
        await _bystander_admitted_on_every_api(channel, "bystander")
        for call in held:
            call.cancel()


@pytest.mark.settings(max_streams_per_app=3)
@pytest.mark.parametrize("api", ["v1.Subscribe", "v2.Subscribe"])
async def test_an_app_at_its_stream_slots_is_refused_on_every_api_and_others_admitted(
    new_server: NewServer, api: str
) -> None:
    """The hog holds its 3 stream slots (its own stream and two KUKSA subscriptions,
    reserving little); one more KUKSA subscription of either version is refused naming
    the slots, a new own stream still replaces the old one (it takes no slot more), and
    another app gets in on every API."""
    server = await new_server()
    hog = _app("hog")
    async with grpc.aio.insecure_channel(server.address) as channel:
        await _add_share_keys(channel)
        held = [
            _get_events(channel, hog, SHARE_KEYS[0], 2),
            _v2_subscribe(channel, hog, SHARE_KEYS[1], 1),
            _v2_subscribe(channel, hog, SHARE_KEYS[2], 1),
        ]
        for call in held:
            await _admitted(call)
        over = OPENERS[api](channel, hog, SHARE_KEYS[3], 10)
        await _refused(over, "event streams per app", "app 'hog' holds 3", "the limit is 3")
        replacing = _events(channel, hog, SHARE_KEYS[0], 2)
        held.append(replacing)
        await _admitted(replacing)
        await _bystander_admitted_on_every_api(channel, "bystander")
        for call in held:
            call.cancel()


async def test_one_key_subscriptions_of_one_app_stop_at_its_share_not_at_the_budget(
    new_server: NewServer,
) -> None:
    """The attack as found: a read-only app opens KUKSA v2 subscriptions of one key each
    until refused. It is refused at its share (SHARE // 10 of 10 each fit), naming it,
    having taken those of the event budget; another app's own stream and KUKSA
    subscriptions are admitted."""
    server = await new_server()
    hog = _app("hog")
    async with grpc.aio.insecure_channel(server.address) as channel:
        await _add_share_keys(channel)
        held: list[Any] = []
        refusal: grpc.aio.AioRpcError | None = None
        for key in SHARE_KEYS:
            call = _v2_subscribe(channel, hog, key, 0)  # buffer 0: the default 100, reserving 10
            refusal = await _refusal(call)
            if refusal is not None:
                break
            held.append(call)
        fit = SHARE // 10
        assert len(held) == fit, f"{len(held)} one-key subscriptions admitted"
        assert refusal is not None
        assert refusal.code() == Code.RESOURCE_EXHAUSTED
        details = refusal.details() or ""
        assert f"event budget per app: app 'hog' reserves {fit * 10}" in details, details
        assert f"the limit is {SHARE}" in details, details
        assert server.runtime.ess.budget_used == fit * 10
        await _bystander_admitted_on_every_api(channel, "dashboard")
        for call in held:
            call.cancel()


@pytest.mark.settings(max_apps=4, event_budget=4 * SHARE)
async def test_max_apps_shares_fit_the_budget_so_every_app_at_its_share_is_admitted(
    new_server: NewServer,
) -> None:
    """The reserve: ``max_apps`` shares of ``event_budget_per_app`` fit the budget (4 x
    SHARE here), so with three apps holding their whole share through every API, a fourth
    still gets its whole share."""
    server = await new_server()
    async with grpc.aio.insecure_channel(server.address) as channel:
        await _add_share_keys(channel)
        held = []
        for i in range(4):
            md = _app(f"app{i}")
            held += [
                _get_events(channel, md, SHARE_KEYS[0], SHARE - 20),
                _v1_subscribe(channel, md, SHARE_KEYS[1], 10),
                _v2_subscribe(channel, md, SHARE_KEYS[2], 10),
            ]
            for call in held[-3:]:
                await _admitted(call)
        assert server.runtime.ess.budget_used == 4 * SHARE
        for call in held:
            call.cancel()


# -- a burst on one connection ----------------------------------------------------------

BURST: Final = 2_000


@pytest.mark.parametrize("max_concurrent_streams", [0, 100])
async def test_a_burst_of_calls_on_one_connection_gets_no_bare_cancelled(
    new_server: NewServer, max_concurrent_streams: int
) -> None:
    """2,000 unary calls at once on one connection: they wait for the middleware to take
    them up (``max_pending_calls``), and with ``max_concurrent_streams`` the client
    queues those beyond it, so gRPC never sheds one with a bare CANCELLED that a client
    cannot tell from its own; a call refused at the bound would be UNAVAILABLE, which
    clients retry (none is, with a gRPC client: it waits for room)."""
    server = await new_server(
        rate_limit_rps=1e6,
        rate_limit_burst=10**6,
        max_concurrent_streams=max_concurrent_streams,
    )
    md = _app("burst")
    async with grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) as channel:
        await _unary(channel, f"{VSTORE}/AddKeys", vs.AddKeysRequest(names=SHARE_KEYS), md)
        request = vs.ListKeysRequest(limit=1)

        async def one() -> tuple[str, str]:
            try:
                await _unary(channel, f"{VSTORE}/ListKeys", request, md)
            except grpc.aio.AioRpcError as e:
                return e.code().name, e.details() or ""
            return "OK", ""

        answers = await asyncio.gather(*(one() for _ in range(BURST)))
    shed = [a for a in answers if a[0] != "OK"]
    assert all(code == "UNAVAILABLE" and details for code, details in shed), (len(shed), shed[:3])


async def test_kuksa_clients_without_an_app_id_in_open_mode_share_no_single_share(
    new_server: NewServer,
) -> None:
    """In open mode every KUKSA client that sends no ``app-id`` is the app
    ``kuksa-client``: the middleware cannot tell them apart, so they are not held to
    one app's share (here more subscriptions than a share's reservations allow, as
    many separate clients open), while an app that names itself still is."""
    server = await new_server()
    fit = min(SHARE // 10, StreamSettings().max_streams_per_app)
    async with grpc.aio.insecure_channel(server.address) as channel:
        await _add_share_keys(channel)
        held = [_v2_subscribe(channel, (), key, 0) for key in SHARE_KEYS[: fit + 4]]
        try:
            for call in held:
                await _admitted(call)
            assert server.runtime.ess.budget_used == (fit + 4) * 10
            named = [_v2_subscribe(channel, _app("named"), key, 0) for key in SHARE_KEYS]
            held += named
            refusals = [await _refusal(call) for call in named]
            assert sum(r is None for r in refusals) == fit
            assert all(r.code() == Code.RESOURCE_EXHAUSTED for r in refusals if r is not None)
        finally:
            for call in held:
                call.cancel()
