"""Property-based fuzzing of every RPC against a running server.

Random well-typed messages (odd strings, huge repeated fields, out-of-range
enums and numbers) and random raw bytes (invalid UTF-8, corrupt wire format).
For every one: the server answers with a status code that is not INTERNAL or
UNKNOWN (those would be our bugs), keeps serving a bystander client, and its
state checks pass.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import hypothesis.strategies as st
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.server import RunningServer, start_server

KEYS = ["Vehicle.Speed", "Vehicle.Cabin.Temperature", "Vehicle.Body.Windows.Row2.Right.Level"]
UNARY = {
    "/vehicle.vstore.v1.VStore/AddKeys": vstore_pb2.AddKeysRequest,
    "/vehicle.vstore.v1.VStore/RemoveKeys": vstore_pb2.RemoveKeysRequest,
    "/vehicle.vstore.v1.VStore/Set": vstore_pb2.SetRequest,
    "/vehicle.vstore.v1.VStore/Get": vstore_pb2.GetRequest,
    "/vehicle.vstore.v1.VStore/ListKeys": vstore_pb2.ListKeysRequest,
    "/vehicle.ess.v1.EventService/Register": ess_pb2.RegisterRequest,
    "/vehicle.ess.v1.EventService/Deregister": ess_pb2.DeregisterRequest,
    "/vehicle.ess.v1.EventService/GetSubscriptions": ess_pb2.GetSubscriptionsRequest,
}
NOT_OURS_TO_BLAME = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

# -- a strategy for any message, from its descriptor -----------------------------------

_text = st.one_of(
    st.sampled_from([*KEYS, "", "Vehicle", "Vehicle..X", "x" * 300, "Vehicle.*", "🚗.Speed"]),
    st.text(max_size=40),
)
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_STRING: _text,
    FieldDescriptor.TYPE_BYTES: st.one_of(
        st.binary(max_size=64), st.builds(bytes, st.just(70_000))
    ),
    FieldDescriptor.TYPE_UINT32: st.one_of(st.integers(0, 5), st.integers(0, 2**32 - 1)),
    FieldDescriptor.TYPE_UINT64: st.one_of(st.integers(0, 5), st.integers(0, 2**64 - 1)),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    # NaN and the infinities too: a filter's threshold or range must refuse them.
    FieldDescriptor.TYPE_DOUBLE: st.floats(),
    FieldDescriptor.TYPE_ENUM: st.one_of(st.integers(0, 3), st.integers(-(2**31), 2**31 - 1)),
}


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in descriptor.fields:
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            value: st.SearchStrategy[Any] = messages(f.message_type, depth + 1)
        else:
            value = _SCALARS[f.type]
        if f.is_repeated:
            size = st.sampled_from([0, 1, 3, 1500]) if depth == 0 else st.sampled_from([0, 1, 2])
            value = size.flatmap(lambda n, v=value: st.lists(v, min_size=n, max_size=n))
        fields[f.name] = st.none() | value
    return st.fixed_dictionaries(fields)


def build(cls: type[Message], raw: dict[str, Any]) -> Message:
    msg = cls()
    _fill(msg, raw)
    return msg


def _fill(msg: Message, raw: dict[str, Any]) -> None:
    chosen_oneofs: set[str] = set()
    for f in msg.DESCRIPTOR.fields:
        value = raw.get(f.name)
        if value is None:
            continue
        if f.containing_oneof is not None:
            if f.containing_oneof.name in chosen_oneofs:
                continue
            chosen_oneofs.add(f.containing_oneof.name)
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            if f.is_repeated:
                for item in value:
                    _fill(getattr(msg, f.name).add(), item)
            else:
                _fill(getattr(msg, f.name), value)
        elif f.is_repeated:
            getattr(msg, f.name).extend(value)
        else:
            setattr(msg, f.name, value)


# -- a server on its own loop, so Hypothesis can drive it with a sync client ------------


class ServerThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.running: RunningServer | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        settings = replace_settings(
            Settings(),
            listen="127.0.0.1:0",
            max_keys_per_request=200,
            event_budget=2000,
            rate_limit_rps=1e6,
            rate_limit_burst=10**6,
        )

        async def start() -> None:
            self.running = await start_server(settings)

        self.loop.run_until_complete(start())
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        assert self._ready.wait(30), "server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.running is not None
        asyncio.run_coroutine_threadsafe(self.running.stop(0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)

    def on_loop(self, fn: Any) -> Any:
        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(30)

    def check(self) -> None:
        assert self.running is not None
        rt = self.running.runtime

        def checks() -> None:
            rt.store.check()
            rt.ess.check()

        self.on_loop(checks)


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[tuple[ServerThread, grpc.Channel, grpc.Channel]]:
    with (
        ServerThread() as st_,
        grpc.insecure_channel(st_.running.address) as ch,
        grpc.insecure_channel(st_.running.address) as bystander,
    ):  # type: ignore[union-attr]
        add = ch.unary_unary(
            "/vehicle.vstore.v1.VStore/AddKeys",
            request_serializer=vstore_pb2.AddKeysRequest.SerializeToString,
            response_deserializer=vstore_pb2.AddKeysResponse.FromString,
        )
        add(vstore_pb2.AddKeysRequest(names=KEYS), metadata=(("app-id", "setup"),), timeout=10)
        yield st_, ch, bystander


def assert_still_serving(server: ServerThread, bystander: grpc.Channel) -> None:
    ping = bystander.unary_unary(
        "/vehicle.vstore.v1.VStore/ListKeys",
        request_serializer=vstore_pb2.ListKeysRequest.SerializeToString,
        response_deserializer=vstore_pb2.ListKeysResponse.FromString,
    )
    ping(vstore_pb2.ListKeysRequest(), metadata=(("app-id", "bystander"),), timeout=10)
    server.check()


def call_raw(channel: grpc.Channel, method: str, payload: bytes, app: str) -> grpc.StatusCode:
    fn = channel.unary_unary(method)  # bytes in, bytes out
    try:
        fn(payload, metadata=(("app-id", app),), timeout=10)
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return,attr-defined]
    return grpc.StatusCode.OK


FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(data=st.data(), method=st.sampled_from(sorted(UNARY)))
def test_unary_rpcs_answer_random_messages_with_a_status(
    fuzz_server: Any, data: st.DataObject, method: str
) -> None:
    server, channel, bystander = fuzz_server
    cls = UNARY[method]
    msg = build(cls, data.draw(messages(cls.DESCRIPTOR)))
    if "EventService" in method and data.draw(st.booleans()):
        opened = channel.unary_stream(
            "/vehicle.ess.v1.EventService/GetEvents",
            request_serializer=ess_pb2.GetEventsRequest.SerializeToString,
            response_deserializer=ess_pb2.EventBatch.FromString,
        )
        stream = opened(ess_pb2.GetEventsRequest(), metadata=(("app-id", "fuzzer"),))
        next(stream)
    else:
        stream = None
    code = call_raw(channel, method, msg.SerializeToString(), "fuzzer")
    if stream is not None:
        stream.cancel()
    assert code not in NOT_OURS_TO_BLAME, (method, code)
    assert_still_serving(server, bystander)


@FUZZ
@given(method=st.sampled_from(sorted(UNARY)), payload=st.binary(max_size=300))
def test_unary_rpcs_answer_random_bytes_with_a_status(
    fuzz_server: Any, method: str, payload: bytes
) -> None:
    server, channel, bystander = fuzz_server
    code = call_raw(channel, method, payload, "fuzzer")
    assert code not in NOT_OURS_TO_BLAME, (method, code)
    assert_still_serving(server, bystander)


@FUZZ
@given(data=st.data(), raw=st.lists(st.binary(max_size=100), max_size=3))
def test_streams_answer_random_messages_with_a_status(
    fuzz_server: Any, data: st.DataObject, raw: list[bytes]
) -> None:
    server, channel, bystander = fuzz_server
    get_events = channel.unary_stream("/vehicle.ess.v1.EventService/GetEvents")
    request = build(
        ess_pb2.GetEventsRequest, data.draw(messages(ess_pb2.GetEventsRequest.DESCRIPTOR))
    )
    stream = get_events(
        request.SerializeToString(), metadata=(("app-id", "fuzz-events"),), timeout=10
    )
    try:
        next(stream)
        code = grpc.StatusCode.OK
    except grpc.RpcError as e:
        code = e.code()  # type: ignore[attr-defined]
    stream.cancel()
    assert code not in NOT_OURS_TO_BLAME, code
    publish = channel.stream_unary("/vehicle.vstore.v1.VStore/Publish")
    batches = [
        build(
            vstore_pb2.PublishRequest, data.draw(messages(vstore_pb2.PublishRequest.DESCRIPTOR))
        ).SerializeToString()
        for _ in range(data.draw(st.integers(0, 3)))
    ]
    try:
        publish(iter(batches + raw), metadata=(("app-id", "fuzz-provider"),), timeout=10)
        code = grpc.StatusCode.OK
    except grpc.RpcError as e:
        code = e.code()  # type: ignore[attr-defined]
    assert code not in NOT_OURS_TO_BLAME, code
    assert_still_serving(server, bystander)
