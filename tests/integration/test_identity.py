"""Identity is established once per call, by the server's interceptor, before any
handler runs: every method of every service with callers refuses a call that
says nobody, and a handler never sees it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from vehicle_middleware.contract.wire import APP_ID_HEADER
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.sdk.write_races import ATTEMPTS, write_raced_end
from vehicle_middleware.server.auth.authentication import Authenticator
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.config import AccessSettings
from vehicle_middleware.server.rpc.identity import Identify, caller
from vehicle_middleware.server.server import RunningServer

from tests.conftest import fails

SERVICES = [
    ess_pb2.DESCRIPTOR.services_by_name["EventService"],
    vstore_pb2.DESCRIPTOR.services_by_name["VStore"],
    actuation_pb2.DESCRIPTOR.services_by_name["Actuation"],
    admin_pb2.DESCRIPTOR.services_by_name["Admin"],
    journal_pb2.DESCRIPTOR.services_by_name["JournalService"],
]
METHODS = [(s.full_name, m) for s in SERVICES for m in s.methods]


async def _call(channel: grpc.aio.Channel, service: str, method: Any) -> grpc.StatusCode:
    """Call ``method`` with an empty request and no metadata; its status code. Made
    again where a stream's write raced the middleware ending the call and grpc answered
    its own INTERNAL in place of the middleware's status
    (:mod:`vehicle_middleware.sdk.write_races`)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            await _call_once(channel, service, method)
        except grpc.aio.AioRpcError as e:
            if method.client_streaming and write_raced_end(e) and attempt < ATTEMPTS:
                continue
            return e.code()
        break
    return grpc.StatusCode.OK


async def _call_once(channel: grpc.aio.Channel, service: str, method: Any) -> None:
    path = f"/{service}/{method.name}"
    identity = (lambda b: b, lambda b: b)  # bytes in, bytes out
    kind = (method.client_streaming, method.server_streaming)
    if kind == (False, False):
        await channel.unary_unary(path, *identity)(b"")
    elif kind == (False, True):
        async for _ in channel.unary_stream(path, *identity)(b""):
            pass
    elif kind == (True, False):
        await channel.stream_unary(path, *identity)(iter([b""]))
    else:
        call = channel.stream_stream(path, *identity)()
        await call.write(b"")
        async for _ in call:
            pass


@pytest.mark.parametrize(("service", "method"), METHODS, ids=[f"{s}/{m.name}" for s, m in METHODS])
async def test_every_method_refuses_a_call_without_identity_before_its_handler(
    server: RunningServer, service: str, method: Any
) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        code = await asyncio.wait_for(_call(channel, service, method), 10)
    assert code is grpc.StatusCode.UNAUTHENTICATED
    # Nothing of an app came to be: no stream, no subscription, no key.
    assert not server.runtime.ess.apps()
    assert len(server.runtime.store) == 0


async def test_a_handler_that_never_asks_who_calls_is_still_protected() -> None:
    """A service whose handler forgets identity: the interceptor refuses for it,
    and what the handler asks afterwards is what the interceptor established."""
    access = AccessSettings()
    authenticator = Authenticator.of(access, RateLimits.of(access))
    seen: list[str] = []

    async def forgetful(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        seen.append(caller(context, authenticator).app)
        return b"ok"

    handler = grpc.method_handlers_generic_handler(
        "test.Probe", {"Forgetful": grpc.unary_unary_rpc_method_handler(forgetful)}
    )
    server = grpc.aio.server(interceptors=[Identify(authenticator, {})])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            probe = channel.unary_unary("/test.Probe/Forgetful")
            await fails(probe(b""), grpc.StatusCode.UNAUTHENTICATED)
            assert seen == []
            assert await probe(b"", metadata=((APP_ID_HEADER, "probe"),)) == b"ok"
            assert seen == ["probe"]
    finally:
        await server.stop(0)
