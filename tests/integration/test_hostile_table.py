"""The hostile-client table: every method of every service the middleware serves, through
the same abuses, enumerated from the running server (its reflection), not hand-listed, so
that a method added later without the same guards fails here.

What the table promises, in token mode:

* No valid identity, no call: every method (unary or stream, either direction) refuses a
  call with no token, an expired token, a malformed one, one signed by another key, one
  for another audience, one whose subject is an internal identity (a KUKSA subscription's
  ESS app, ``<app>/kuksa-sub-N``), and a valid token whose ``app-id`` header claims such
  an identity: UNAUTHENTICATED with a message saying why (never INTERNAL or UNKNOWN), a
  stream on its first read, over TCP and over the Unix socket; and nothing changes (the
  store's keys and values, the ESS's apps and their subscriptions). Even the abusive
  tokens that would grant every scope are refused.
* Only health and reflection have no caller: they answer without a token.
* A valid token with no scopes learns nothing about keys: where a request names a key (by
  name, branch, pattern or id) the answers for a key that exists and for one that does not
  are the same once the name (or id) is replaced by a placeholder (the status, its
  message, the response or a stream's first message); a method that names no key refuses
  it naming the missing scope, or answers without naming any key. It writes nothing.
  A leak found is a strict xfail naming it (none now).
* :data:`TABLE` holds every method the server serves: a new method fails
  :func:`test_the_table_covers_every_method_the_server_serves` until it is in the table,
  and the abuse sweeps call it (with an empty request) before it is.

The limit rows over the same enumeration (oversized batches and messages, the request
rate per app and transport, a large legal request with a bystander) are in
:mod:`.test_hostile_limits`, which says what they promise; it reuses this module's
table, reflection and calls (:func:`answered`, :func:`state`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import pkgutil
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import grpc
import pytest
import vehicle_middleware.proto
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
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
from vehicle_middleware.sdk.write_races import ATTEMPTS, write_raced_end
from vehicle_middleware.server.server import RunningServer

from tests.integration.conftest import AUD, Keys

Code = grpc.StatusCode
Metadata = tuple[tuple[str, str], ...]
Ref = Literal["name", "id", "branch", "pattern"]

EVERY_SCOPE: Final = "read provide create actuate admin peer journal:read"
TIMEOUT_S: Final = 30.0
"""Each call's first answer must come within this: a hang fails, and nothing passes by
waiting (every answer awaited is the server's)."""

NO_CALLER: Final = frozenset({"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"})
"""The services without callers, by design: they answer anyone, token or not."""

BRANCH: Final = "Vehicle.Hidden"
SECRET: Final = f"{BRANCH}.Secret"
"""The key a scope-less token probes for; its siblings make the branch wide enough for
a one-key page's scan budget (4 keys) to run out inside it."""
SIBLINGS: Final = tuple(f"{BRANCH}.K{i}" for i in range(8))
UNUSED_ID: Final = 987_654
INTERNAL: Final = "victim/kuksa-sub-1"
"""A KUKSA subscription's ESS app: an identity the middleware made, no caller's."""
EXISTING: Final[dict[Ref, str]] = {"name": SECRET, "branch": BRANCH, "pattern": f"{BRANCH}.*"}
MISSING: Final[dict[Ref, str | int]] = {
    "name": f"{BRANCH}.Absent",
    "branch": "Vehicle.Nowhere",
    "pattern": "Vehicle.Nowhere.*",
    "id": UNUSED_ID,
}

# -- the table --------------------------------------------------------------------------

Requests = list[Message]
"""A call's requests: one for a unary request, the first messages of a stream's."""


@dataclass(frozen=True)
class Probe:
    """One way a method's request names a key, and what a scope-less token gets for it
    (the same whether or not the key exists)."""

    ref: Ref
    build: Callable[[Any], Requests]
    """The requests naming a key (a name, branch or pattern: str; an id: int)."""
    code: Code
    """The scope-less answer's status (OK: a response, e.g. per-key errors in it)."""
    leak: str = ""
    """Non-empty: the answers differ (a known leak): the case is a strict xfail saying so."""


@dataclass(frozen=True)
class Keyless:
    """What a scope-less token gets from a method that names no key: OK (an answer
    naming no key), PERMISSION_DENIED naming ``scope``, or UNIMPLEMENTED."""

    code: Code
    scope: str = ""


ANSWERS: Final = Keyless(Code.OK)
UNIMPLEMENTED: Final = Keyless(Code.UNIMPLEMENTED)


def denied(scope: str) -> Keyless:
    return Keyless(Code.PERMISSION_DENIED, scope)


@dataclass(frozen=True)
class Row:
    """One method: how its requests name keys (none: ``keyless``)."""

    probes: dict[str, Probe] = field(default_factory=dict)
    keyless: Keyless | None = None
    request: Callable[[], Requests] | None = None
    """A key-less method's requests (default: one empty message of its input type)."""
    events: bool = False
    """The scope-less app opens its event stream first (Register needs one)."""


def _sid(ref: str | int) -> t2.SignalID:
    return t2.SignalID(id=ref) if isinstance(ref, int) else t2.SignalID(path=ref)


def _v1_set(path: str, target: bool = False) -> Requests:
    point = t1.Datapoint(float=1.0)
    entry = t1.DataEntry(path=path, actuator_target=point) if target else t1.DataEntry(path=path)
    if not target:
        entry.value.CopyFrom(point)
    wanted = t1.FIELD_ACTUATOR_TARGET if target else t1.FIELD_VALUE
    return [v1.SetRequest(updates=[v1.EntryUpdate(entry=entry, fields=[wanted])])]


def _v2_actuate(ref: str | int) -> v2.ActuateRequest:
    return v2.ActuateRequest(signal_id=_sid(ref), value=t2.Value(float=1.0))


def _provider(**action: Any) -> Requests:
    return [v2.OpenProviderStreamRequest(**action)]


DATA: Final = encode(1.0)
POINT: Final = t2.Datapoint(value=t2.Value(float=1.0))

VSTORE: Final = "vehicle.vstore.v1.VStore"
ESS: Final = "vehicle.ess.v1.EventService"
ACTUATION: Final = "vehicle.actuation.v1.Actuation"
ADMIN: Final = "vehicle.admin.v1.Admin"
JOURNAL: Final = "vehicle.journal.v1.JournalService"
PEER: Final = "vehicle.cluster.v1.Peer"
V1: Final = "kuksa.val.v1.VAL"
V2: Final = "kuksa.val.v2.VAL"

TABLE: Final[dict[str, Row]] = {
    # -- the own V-Store --------------------------------------------------------------
    f"{VSTORE}/AddKeys": Row(
        {"name": Probe("name", lambda k: [vs.AddKeysRequest(names=[k])], Code.PERMISSION_DENIED)}
    ),
    f"{VSTORE}/RemoveKeys": Row(
        {"name": Probe("name", lambda k: [vs.RemoveKeysRequest(names=[k])], Code.PERMISSION_DENIED)}
    ),
    f"{VSTORE}/Set": Row(
        {
            "name": Probe(
                "name",
                lambda k: [vs.SetRequest(updates=[vs.Update(name=k, data=DATA)])],
                Code.PERMISSION_DENIED,
            ),
            "id": Probe(
                "id",
                lambda i: [vs.SetRequest(updates=[vs.Update(id=i, data=DATA)])],
                Code.NOT_FOUND,
            ),
        }
    ),
    f"{VSTORE}/Publish": Row(
        {
            "id": Probe(
                "id",
                lambda i: [vs.PublishRequest(updates=[vs.IdUpdate(id=i, data=DATA)])],
                Code.NOT_FOUND,
            )
        }
    ),
    f"{VSTORE}/Get": Row({"name": Probe("name", lambda k: [vs.GetRequest(names=[k])], Code.OK)}),
    f"{VSTORE}/WatchDemand": Row(
        {
            "name": Probe(
                "name", lambda k: [vs.WatchDemandRequest(names=[k])], Code.PERMISSION_DENIED
            )
        }
    ),
    f"{VSTORE}/ListKeys": Row(
        {
            "name": Probe("name", lambda k: [vs.ListKeysRequest(prefix=k)], Code.OK),
            "branch": Probe(
                "branch",
                lambda k: [vs.ListKeysRequest(prefix=k, limit=1)],
                Code.OK,
            ),
        }
    ),
    # -- the own event service --------------------------------------------------------
    f"{ESS}/GetEvents": Row(keyless=ANSWERS),
    f"{ESS}/Events": Row(
        keyless=ANSWERS, request=lambda: [ess.EventsRequest(open=ess.OpenEvents())]
    ),
    f"{ESS}/Register": Row(
        {
            "name": Probe(
                "name",
                lambda k: [
                    ess.RegisterRequest(subscriptions=[ess.Subscription(key=k, want_current=True)])
                ],
                Code.OK,
            )
        },
        events=True,
    ),
    f"{ESS}/Deregister": Row(
        {"name": Probe("name", lambda k: [ess.DeregisterRequest(keys=[k])], Code.OK)},
        events=True,
    ),
    f"{ESS}/GetSubscriptions": Row(keyless=ANSWERS),
    # -- actuation, admin, journal, cluster -------------------------------------------
    f"{ACTUATION}/Actuate": Row(
        {
            "name": Probe(
                "name",
                lambda k: [act.ActuateRequest(targets=[act.Target(name=k, data=DATA)])],
                Code.PERMISSION_DENIED,
            )
        }
    ),
    f"{ACTUATION}/ProvideActuators": Row(
        {
            "name": Probe(
                "name",
                lambda k: [act.ProviderMessage(claim=act.Claim(names=[k]))],
                Code.PERMISSION_DENIED,
            )
        }
    ),
    f"{ADMIN}/GetStats": Row(
        {"name": Probe("name", lambda k: [adm.GetStatsRequest(keys=[k])], Code.PERMISSION_DENIED)}
    ),
    f"{JOURNAL}/RegisterConsumer": Row(
        keyless=denied("journal:read"),
        request=lambda: [jnl.RegisterConsumerRequest(component="probe")],
    ),
    f"{JOURNAL}/UnregisterConsumer": Row(
        keyless=denied("journal:read"),
        request=lambda: [jnl.UnregisterConsumerRequest(component="probe")],
    ),
    f"{JOURNAL}/ListConsumers": Row(
        keyless=denied("journal:read"), request=lambda: [jnl.ListConsumersRequest(all_apps=True)]
    ),
    f"{JOURNAL}/Poll": Row(
        keyless=denied("journal:read"), request=lambda: [jnl.PollRequest(component="LIVE", max=1)]
    ),
    f"{JOURNAL}/Follow": Row(
        keyless=denied("journal:read"),
        request=lambda: [
            jnl.FollowRequest(start=jnl.FollowStart(component="LIVE", max=1, window=1))
        ],
    ),
    f"{PEER}/Link": Row(
        keyless=denied("peer"),
        request=lambda: [peer.PeerMessage(hello=peer.Hello(node_id="nobody"))],
    ),
    f"{PEER}/Status": Row(keyless=denied("peer or admin")),
    # -- KUKSA v1 ---------------------------------------------------------------------
    f"{V1}/GetServerInfo": Row(keyless=ANSWERS),
    f"{V1}/Get": Row(
        {
            ref: Probe(ref, lambda k: [v1.GetRequest(entries=[v1.EntryRequest(path=k)])], Code.OK)
            for ref in ("name", "branch", "pattern")
        }
    ),
    f"{V1}/Set": Row(
        {
            "name": Probe("name", _v1_set, Code.OK),
            "name (actuator target)": Probe("name", lambda k: _v1_set(k, True), Code.OK),
        }
    ),
    f"{V1}/StreamedUpdate": Row(keyless=UNIMPLEMENTED),
    f"{V1}/Subscribe": Row(
        {
            "name": Probe(
                "name",
                lambda k: [v1.SubscribeRequest(entries=[v1.SubscribeEntry(path=k)])],
                Code.PERMISSION_DENIED,
            ),
            "branch": Probe(
                "branch",
                lambda k: [v1.SubscribeRequest(entries=[v1.SubscribeEntry(path=k)])],
                Code.PERMISSION_DENIED,
            ),
            "pattern": Probe(
                "pattern",
                lambda k: [v1.SubscribeRequest(entries=[v1.SubscribeEntry(path=k)])],
                Code.NOT_FOUND,
            ),
        }
    ),
    # -- KUKSA v2 ---------------------------------------------------------------------
    f"{V2}/GetServerInfo": Row(keyless=ANSWERS),
    f"{V2}/GetValue": Row(
        {
            "name": Probe(
                "name", lambda k: [v2.GetValueRequest(signal_id=_sid(k))], Code.PERMISSION_DENIED
            ),
            "id": Probe("id", lambda i: [v2.GetValueRequest(signal_id=_sid(i))], Code.NOT_FOUND),
        }
    ),
    f"{V2}/GetValues": Row(
        {
            "name": Probe(
                "name",
                lambda k: [v2.GetValuesRequest(signal_ids=[_sid(k)])],
                Code.PERMISSION_DENIED,
            ),
            "id": Probe(
                "id", lambda i: [v2.GetValuesRequest(signal_ids=[_sid(i)])], Code.NOT_FOUND
            ),
        }
    ),
    f"{V2}/Subscribe": Row(
        {
            "name": Probe(
                "name",
                lambda k: [v2.SubscribeRequest(signal_paths=[k])],
                Code.PERMISSION_DENIED,
            )
        }
    ),
    f"{V2}/SubscribeById": Row(
        {"id": Probe("id", lambda i: [v2.SubscribeByIdRequest(signal_ids=[i])], Code.NOT_FOUND)}
    ),
    f"{V2}/Actuate": Row(
        {
            "name": Probe("name", lambda k: [_v2_actuate(k)], Code.PERMISSION_DENIED),
            "id": Probe("id", lambda i: [_v2_actuate(i)], Code.NOT_FOUND),
        }
    ),
    f"{V2}/ActuateStream": Row(keyless=UNIMPLEMENTED),
    f"{V2}/BatchActuate": Row(
        {
            "name": Probe(
                "name",
                lambda k: [v2.BatchActuateRequest(actuate_requests=[_v2_actuate(k)])],
                Code.PERMISSION_DENIED,
            ),
            "id": Probe(
                "id",
                lambda i: [v2.BatchActuateRequest(actuate_requests=[_v2_actuate(i)])],
                Code.NOT_FOUND,
            ),
        }
    ),
    f"{V2}/ListMetadata": Row(
        {
            "name": Probe("name", lambda k: [v2.ListMetadataRequest(root=k)], Code.NOT_FOUND),
            "branch": Probe("branch", lambda k: [v2.ListMetadataRequest(root=k)], Code.NOT_FOUND),
            "pattern": Probe(
                "pattern",
                lambda k: [v2.ListMetadataRequest(root=k)],
                Code.NOT_FOUND,
            ),
        }
    ),
    f"{V2}/PublishValue": Row(
        {
            "name": Probe(
                "name",
                lambda k: [v2.PublishValueRequest(signal_id=_sid(k), data_point=POINT)],
                Code.PERMISSION_DENIED,
            ),
            "id": Probe(
                "id",
                lambda i: [v2.PublishValueRequest(signal_id=_sid(i), data_point=POINT)],
                Code.NOT_FOUND,
            ),
        }
    ),
    f"{V2}/OpenProviderStream": Row(
        {
            "name (claim)": Probe(
                "name",
                lambda k: _provider(
                    provide_actuation_request=v2.ProvideActuationRequest(
                        actuator_identifiers=[_sid(k)]
                    )
                ),
                Code.PERMISSION_DENIED,
            ),
            "id (claim)": Probe(
                "id",
                lambda i: _provider(
                    provide_actuation_request=v2.ProvideActuationRequest(
                        actuator_identifiers=[_sid(i)]
                    )
                ),
                Code.NOT_FOUND,
            ),
            "id (publish)": Probe(
                "id",
                lambda i: _provider(
                    publish_values_request=v2.PublishValuesRequest(
                        request_id=1, data_points={i: POINT}
                    )
                ),
                Code.OK,
            ),
            "id (provide signals)": Probe(
                "id",
                lambda i: _provider(
                    provide_signal_request=v2.ProvideSignalRequest(
                        signals_sample_intervals={i: t2.SampleInterval(interval_ms=100)}
                    )
                ),
                Code.NOT_FOUND,
            ),
        }
    ),
}
"""Every method the server serves (but health's and reflection's), by ``service/method``."""

# -- enumerating and calling ------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One method the server serves, as its reflection describes it."""

    service: str
    name: str
    input: type[Message]
    output: type[Message]
    client_streaming: bool
    server_streaming: bool

    @property
    def full(self) -> str:
        return f"{self.service}/{self.name}"


def _message_class(type_name: str) -> type[Message]:
    descriptor = descriptor_pool.Default().FindMessageTypeByName(type_name.lstrip("."))
    return message_factory.GetMessageClass(descriptor)


async def _reflect(channel: grpc.aio.Channel) -> tuple[list[str], list[Method]]:
    """The services the server's reflection lists, and each of their methods."""
    call: Any = channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )()
    try:
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        listed = await asyncio.wait_for(call.read(), TIMEOUT_S)
        services = [s.name for s in listed.list_services_response.service]
        methods: list[Method] = []
        for service in services:
            await call.write(reflection_pb2.ServerReflectionRequest(file_containing_symbol=service))
            reply = await asyncio.wait_for(call.read(), TIMEOUT_S)
            files = [
                descriptor_pb2.FileDescriptorProto.FromString(blob)
                for blob in reply.file_descriptor_response.file_descriptor_proto
            ]
            [described] = [
                s for f in files for s in f.service if f"{f.package}.{s.name}" == service
            ]
            methods.extend(
                Method(
                    service,
                    m.name,
                    _message_class(m.input_type),
                    _message_class(m.output_type),
                    m.client_streaming,
                    m.server_streaming,
                )
                for m in described.method
            )
        await call.done_writing()
    finally:
        call.cancel()
    return services, methods


@dataclass(frozen=True)
class Answer:
    """A call's first answer: its status, and the response (or a stream's first message)."""

    code: Code
    details: str
    message: Message | None = None

    def text(self) -> str:
        shown = text_format.MessageToString(self.message) if self.message is not None else ""
        return f"{self.code.name}: {self.details!r} {{{shown.strip()}}}"

    def blanked(self, *refs: str | int) -> str:
        """:meth:`text` with each of the keys' names (or ids) as a placeholder."""
        text = self.text()
        for ref in refs:
            if isinstance(ref, int):
                text = re.sub(rf"\b{ref}\b", "<ID>", text)
            else:
                text = text.replace(ref, "<KEY>")
        return text


async def _stream_of(requests: Sequence[Message], hold: bool) -> AsyncIterator[Message]:
    for request in requests:
        yield request
    if hold:  # the stream stays open: its first answer is the server's, not our half-close
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def answered(
    channel: grpc.aio.Channel,
    method: Method,
    requests: Sequence[Message],
    md: Metadata,
    serialize: Callable[[Message], bytes] | None = None,
) -> AsyncIterator[Answer]:
    """Call ``method`` with ``requests`` and ``md``: its status and response, or a
    stream's first message, with the call still open (a stream stays open, its requests
    written, until the block ends; then the call is cancelled). ``serialize``: how the
    requests go on the wire (default: as their type serializes them). A call that gives
    no first answer within :data:`TIMEOUT_S` raises TimeoutError.

    A stream whose first write races the middleware ending the call gets grpc's own
    INTERNAL in place of the middleware's answer (:mod:`vehicle_middleware.sdk.write_races`: a few
    calls in
    a thousand); the call is then made again, up to ``ATTEMPTS`` times, as the SDK does
    and as the app developers' guide tells a client of its own to, so that the answer
    judged is always the middleware's."""
    path = f"/{method.service}/{method.name}"
    kw: dict[str, Any] = {
        "request_serializer": serialize or method.input.SerializeToString,
        "response_deserializer": method.output.FromString,
    }
    for attempt in range(1, ATTEMPTS + 1):
        if method.client_streaming:
            stream = _stream_of(requests, hold=method.server_streaming)
            if method.server_streaming:
                call: Any = channel.stream_stream(path, **kw)(stream, metadata=md)
            else:
                call = channel.stream_unary(path, **kw)(stream, metadata=md)
        elif method.server_streaming:
            call = channel.unary_stream(path, **kw)(requests[0], metadata=md)
        else:
            call = channel.unary_unary(path, **kw)(requests[0], metadata=md)
        try:
            if method.server_streaming:
                first = await asyncio.wait_for(call.read(), TIMEOUT_S)
                if first is grpc.aio.EOF:
                    got = Answer(await call.code(), await call.details() or "")
                else:
                    got = Answer(Code.OK, "", first)
            else:
                got = Answer(Code.OK, "", await asyncio.wait_for(call, TIMEOUT_S))
        except grpc.aio.AioRpcError as e:
            got = Answer(e.code(), e.details() or "")
            if method.client_streaming and write_raced_end(e) and attempt < ATTEMPTS:
                call.cancel()
                continue
        except BaseException:
            call.cancel()
            raise
        break
    try:
        yield got
    finally:
        call.cancel()


async def first_answer(
    channel: grpc.aio.Channel, method: Method, requests: Sequence[Message], md: Metadata
) -> Answer:
    """:func:`answered`, the call then cancelled."""
    async with answered(channel, method, requests, md) as got:
        return got


def state(server: RunningServer) -> tuple[object, ...]:
    """What a refused call must not change: the store's keys, ids, values and versions,
    and the ESS's apps with their subscriptions."""
    store = server.runtime.store
    ess_ = server.runtime.ess
    entries = [store.get(name) for name, _ in store.iter_keys()]
    return (
        tuple((e.name, e.key_id, e.data, e.version, e.time_ns) for e in entries),
        tuple((app, tuple(s.key for s in ess_.subscriptions(app))) for app in sorted(ess_.apps())),
    )


def _bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def secure_settings(tmp_path: Path) -> dict[str, Any]:
    """The table's token-mode server has its journal on (every service live) and
    listens on a Unix socket beside TCP."""
    return {
        "journal_dir": str(tmp_path / "journal"),
        "unix_socket": str(tmp_path / "vehicle_middleware.sock"),
    }


@pytest.fixture
async def channel(secure: RunningServer, keys: Keys) -> AsyncIterator[grpc.aio.Channel]:
    """A channel to ``secure``, which holds :data:`SECRET` (with a value) and its
    siblings by then."""
    async with grpc.aio.insecure_channel(secure.address) as ch:
        admin = _bearer(keys.token("admin", EVERY_SCOPE))
        add = ch.unary_unary(
            f"/{VSTORE}/AddKeys",
            request_serializer=vs.AddKeysRequest.SerializeToString,
            response_deserializer=vs.AddKeysResponse.FromString,
        )
        await add(vs.AddKeysRequest(names=[*SIBLINGS, SECRET]), metadata=admin)
        write = ch.unary_unary(
            f"/{VSTORE}/Set",
            request_serializer=vs.SetRequest.SerializeToString,
            response_deserializer=vs.SetResponse.FromString,
        )
        await write(
            vs.SetRequest(updates=[vs.Update(name=SECRET, data=encode(42.0))]), metadata=admin
        )
        yield ch


async def served(channel: grpc.aio.Channel) -> list[Method]:
    """Every method of every service with callers that the server's reflection lists."""
    services, methods = await _reflect(channel)
    assert set(services) >= NO_CALLER, services
    return [m for m in methods if m.service not in NO_CALLER]


def _requests_for(method: Method, existing_id: int) -> Requests:
    """The method's table request naming the existing key, else one empty message."""
    row = TABLE.get(method.full)
    if row is None:
        return [method.input()]
    if row.probes:
        probe = next(iter(row.probes.values()))
        return probe.build(existing_id if probe.ref == "id" else EXISTING[probe.ref])
    return row.request() if row.request is not None else [method.input()]


# -- the method list --------------------------------------------------------------------


async def test_the_table_covers_every_method_the_server_serves(
    channel: grpc.aio.Channel,
) -> None:
    methods = {m.full for m in await served(channel)}
    missing = sorted(methods - set(TABLE))
    stale = sorted(set(TABLE) - methods)
    assert not missing, f"served, but not in the table (add them, with their guards): {missing}"
    assert not stale, f"in the table, but not served: {stale}"
    assert len(methods) == len(TABLE)


def _proto_services() -> dict[str, tuple[str, type[Message]]]:
    """Every service of the project's compiled protos (its own and KUKSA's): full name ->
    (its first method, that method's input type)."""
    found: dict[str, tuple[str, type[Message]]] = {}
    for module in pkgutil.walk_packages(
        vehicle_middleware.proto.__path__, "vehicle_middleware.proto."
    ):
        if module.name.endswith("_pb2"):
            file = importlib.import_module(module.name).DESCRIPTOR
            for service in file.services_by_name.values():
                first = service.methods[0]
                found[service.full_name] = (
                    first.name,
                    message_factory.GetMessageClass(first.input_type),
                )
    return found


async def test_reflection_lists_every_service_of_the_project_that_the_server_answers(
    channel: grpc.aio.Channel,
) -> None:
    """A service served but missing from reflection would escape the table: every
    service of the compiled protos answers (UNAUTHENTICATED without a token) exactly
    when reflection lists it, and is UNIMPLEMENTED otherwise."""
    services, _ = await _reflect(channel)
    protos = _proto_services()
    assert len(protos) >= 8, protos
    for service, (name, request) in sorted(protos.items()):
        call: Any = channel.unary_unary(
            f"/{service}/{name}", request_serializer=request.SerializeToString
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            # A stream's handler is looked up (and refused) before any message is read.
            await asyncio.wait_for(call(request()), TIMEOUT_S)
        expected = Code.UNAUTHENTICATED if service in services else Code.UNIMPLEMENTED
        assert err.value.code() == expected, (service, err.value.details())


async def test_only_health_and_reflection_answer_without_a_token(
    channel: grpc.aio.Channel,
) -> None:
    services, _ = await _reflect(channel)  # reflection answered, with no token
    assert {s for s in services if s.startswith("grpc.")} == NO_CALLER
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    reply = await asyncio.wait_for(check(health_pb2.HealthCheckRequest()), TIMEOUT_S)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


# -- abuses: refused before anything happens ------------------------------------------


@dataclass(frozen=True)
class Abuse:
    metadata: Callable[[Keys], Metadata]
    says: str
    """What the refusal's message says."""


ABUSES: Final[dict[str, Abuse]] = {
    "no token": Abuse(lambda k: (), "missing 'authorization' metadata"),
    "expired token": Abuse(
        lambda k: _bearer(k.token("victim", EVERY_SCOPE, ttl_s=-3600)), "token expired"
    ),
    "malformed token": Abuse(lambda k: _bearer("not.a.token"), "malformed token"),
    "token signed by another key": Abuse(
        lambda k: _bearer(k.token("victim", EVERY_SCOPE, key=k.other_private)),
        "signature does not verify",
    ),
    "token for another audience": Abuse(
        lambda k: _bearer(k.token("victim", EVERY_SCOPE, audience="another-vehicle")),
        f"token audience is not {AUD!r}",
    ),
    "token whose subject is an internal identity": Abuse(
        lambda k: _bearer(k.token(INTERNAL, EVERY_SCOPE)), "token subject is not a valid app id"
    ),
    "app-id claiming an internal identity": Abuse(
        lambda k: (*_bearer(k.token("victim", EVERY_SCOPE)), ("app-id", INTERNAL)),
        "malformed 'app-id' metadata",
    ),
}


@pytest.mark.parametrize("transport", ["tcp", "unix"])
@pytest.mark.parametrize("abuse", list(ABUSES))
async def test_every_method_refuses_a_bad_identity_as_unauthenticated_changing_nothing(
    secure: RunningServer, channel: grpc.aio.Channel, keys: Keys, abuse: str, transport: str
) -> None:
    methods = await served(channel)
    md = ABUSES[abuse].metadata(keys)
    says = ABUSES[abuse].says
    existing_id = secure.runtime.store.id_of(SECRET)
    assert existing_id is not None
    address = secure.address if transport == "tcp" else secure.addresses[-1]
    assert address.startswith("unix:") == (transport == "unix")
    before = state(secure)
    wrong: list[str] = []
    async with grpc.aio.insecure_channel(address) as hostile:
        for method in methods:
            try:
                got = await first_answer(hostile, method, _requests_for(method, existing_id), md)
            except TimeoutError:
                wrong.append(f"{method.full}: no answer within {TIMEOUT_S} s (hung)")
                continue
            if got.code != Code.UNAUTHENTICATED or says not in got.details:
                wrong.append(f"{method.full}: {got.text()}")
            if state(secure) != before:
                wrong.append(f"{method.full}: changed the store or the ESS's apps")
    assert not wrong, f"{abuse} over {transport}:\n" + "\n".join(wrong)
    assert len(methods) >= len(TABLE)


# -- a valid token without scopes --------------------------------------------------------


@contextlib.asynccontextmanager
async def _event_stream(channel: grpc.aio.Channel, md: Metadata) -> AsyncIterator[None]:
    """The app's event stream, open (StreamStarted read) while inside."""
    call: Any = channel.unary_stream(
        f"/{ESS}/GetEvents",
        request_serializer=ess.GetEventsRequest.SerializeToString,
        response_deserializer=ess.EventBatch.FromString,
    )(ess.GetEventsRequest(), metadata=md)
    try:
        first = await asyncio.wait_for(call.read(), TIMEOUT_S)
        assert first.events[0].HasField("started"), first
        yield
    finally:
        call.cancel()


async def _method(channel: grpc.aio.Channel, full: str) -> Method:
    [method] = [m for m in await served(channel) if m.full == full]
    return method


def _short(full: str) -> str:
    """``v1.VStore/Set`` for ``vehicle.vstore.v1.VStore/Set``: a test id."""
    return ".".join(full.split(".")[-2:])


KEYED: Final = [
    pytest.param(
        full,
        label,
        id=f"{_short(full)}-{label}",
        marks=[pytest.mark.xfail(strict=True, reason=probe.leak)] if probe.leak else [],
    )
    for full, row in TABLE.items()
    for label, probe in row.probes.items()
]


@pytest.mark.parametrize(("full", "label"), KEYED)
async def test_a_scopeless_token_cannot_tell_whether_a_key_exists(
    secure: RunningServer, channel: grpc.aio.Channel, keys: Keys, full: str, label: str
) -> None:
    row = TABLE[full]
    probe = row.probes[label]
    method = await _method(channel, full)
    md = _bearer(keys.token("nobody", ""))
    existing_id = secure.runtime.store.id_of(SECRET)
    assert existing_id is not None
    there: str | int = existing_id if probe.ref == "id" else EXISTING[probe.ref]
    absent = MISSING[probe.ref]
    assert secure.runtime.store.name_of(UNUSED_ID) is None
    assert secure.runtime.store.id_of(str(absent)) is None
    before = state(secure)[0]
    async with contextlib.AsyncExitStack() as stack:
        if row.events:
            await stack.enter_async_context(_event_stream(channel, md))
        found = await first_answer(channel, method, probe.build(there), md)
        not_found = await first_answer(channel, method, probe.build(absent), md)
    # Both placeholders in both answers: a stray match blanks the same in each.
    assert found.blanked(there, absent) == not_found.blanked(there, absent), (
        f"{full} tells whether {there!r} exists:\n  existing: {found.text()}\n"
        f"  missing:  {not_found.text()}"
    )
    assert found.code == probe.code, found.text()
    if found.code != Code.OK:
        assert found.details, found.text()
    assert state(secure)[0] == before, "a scope-less token wrote"


KEYLESS: Final = [
    pytest.param(full, id=_short(full)) for full, row in TABLE.items() if not row.probes
]


@pytest.mark.parametrize("full", KEYLESS)
async def test_a_scopeless_token_is_denied_naming_the_scope_or_told_no_key(
    secure: RunningServer, channel: grpc.aio.Channel, keys: Keys, full: str
) -> None:
    row = TABLE[full]
    assert row.keyless is not None, f"{full}: a method without probes says what it answers"
    method = await _method(channel, full)
    md = _bearer(keys.token("nobody", ""))
    before = state(secure)[0]
    requests = row.request() if row.request is not None else [method.input()]
    got = await first_answer(channel, method, requests, md)
    assert got.code == row.keyless.code, got.text()
    if got.code == Code.PERMISSION_DENIED:
        assert f"its token has no {row.keyless.scope!r} scope" in got.details, got.text()
    assert BRANCH not in got.text(), f"{full} named a key the caller may not read: {got.text()}"
    assert state(secure)[0] == before, "a scope-less token wrote"
