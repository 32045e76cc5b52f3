"""Who is calling, established once per call by a server interceptor.

:class:`Identify` runs before every handler of the services that have callers
(all of the middleware's own, the KUKSA ones with their allowances): it
authenticates the call's metadata (and, with mutual TLS, its client
certificate) by the middleware's identity rules
(:mod:`vehicle_middleware.server.auth.authentication`), admits it by its rate limits, and
refuses it with the mapped status (UNAUTHENTICATED, RESOURCE_EXHAUSTED) before
the handler runs; a stream of a caller whose token expires ends then
(:mod:`vehicle_middleware.server.expiry`). So a handler cannot forget either; :func:`caller` returns
what the interceptor established. Services listed with no rule (health,
reflection) have no caller.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeAlias

import grpc
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.errors import EndReason, StreamEndedError
from vehicle_middleware.server.expiry import armed
from vehicle_middleware.server.rpc.handlers import Continuation, around, service_of
from vehicle_middleware.server.rpc.status import status_for
from vehicle_middleware.server.tls import certificate_names

__all__ = ["Identify", "Rule", "authenticate", "caller", "certified_names"]

Rule: TypeAlias = Callable[["grpc.aio.ServicerContext[Any, Any]", Authenticator], Caller]
"""How a service's calls are authenticated."""

_CALLER: ContextVar[Caller | None] = ContextVar("vmw_caller", default=None)
"""The caller of the call this task serves, set by :class:`Identify`."""


def certified_names(
    context: grpc.aio.ServicerContext[Any, Any], authenticator: Authenticator
) -> tuple[str, ...] | None:
    """The names of the call's client certificate with mutual TLS on, else None
    (read only then: a plaintext middleware pays nothing per call)."""
    return certificate_names(context.auth_context()) if authenticator.mutual_tls else None


def authenticate(
    context: grpc.aio.ServicerContext[Any, Any], authenticator: Authenticator
) -> Caller:
    """The project's rule: the caller of a call, admitted by its rate limit.

    Raises:
        UnauthenticatedError, LimitExceededError.
    """
    return authenticator.authenticate(
        tuple(context.invocation_metadata() or ()),
        context.peer() or "",
        certified=certified_names(context, authenticator),
    )


def caller(
    context: grpc.aio.ServicerContext[Any, Any],
    authenticator: Authenticator,
    rule: Rule = authenticate,
) -> Caller:
    """The authenticated caller of this call: the one :class:`Identify`
    established (authenticated here by ``rule`` only on a server without it)."""
    who = _CALLER.get()
    return who if who is not None else rule(context, authenticator)


class Identify(grpc.aio.ServerInterceptor):
    """Establish the caller of every call before its handler runs.

    ``rules`` maps a full service name to its :data:`Rule`, or to None for a
    service without callers; a service not listed gets :func:`authenticate`.
    """

    def __init__(self, authenticator: Authenticator, rules: Mapping[str, Rule | None]) -> None:
        self._authenticator = authenticator
        self._rules = dict(rules)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        service = service_of(handler_call_details)
        rule = self._rules.get(service, authenticate)
        if rule is None:
            return handler
        authenticator = self._authenticator
        streaming = handler.request_streaming or handler.response_streaming

        @contextlib.asynccontextmanager
        async def established(context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[None]:
            try:
                who = rule(context, authenticator)
            except Exception as e:
                code, message = status_for(e)
                await context.abort(code, message)
            _CALLER.set(who)
            if who.expires_at is None or not streaming:
                yield
                return
            # Every stream ends when its caller's token expires (vehicle_middleware.server.expiry).
            with armed(who.expires_at) as expiry:
                try:
                    yield
                except asyncio.CancelledError:
                    if not expiry.fired or expiry.handled or context.cancelled():
                        raise
                    code, message = status_for(StreamEndedError(EndReason.EXPIRED, who.app))
                    await context.abort(code, message)

        return around(handler, established)
