"""What the server interceptors share: the continuation's type, and running a
method's handler inside a context (identity established, the call tracked).

grpc.aio runs the interceptors in the order given, each on the handler the
next one returned. An interceptor object that is *false* (``__len__`` 0)
ends the chain there: grpc skips it and every one after it, silently.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc

__all__ = ["Around", "Continuation", "around", "service_of"]

Continuation: TypeAlias = Callable[
    [grpc.HandlerCallDetails], Awaitable["grpc.RpcMethodHandler[Any, Any] | None"]
]
"""What an interceptor calls for the handler of the rest of the chain."""

Around: TypeAlias = Callable[
    ["grpc.aio.ServicerContext[Any, Any]"], contextlib.AbstractAsyncContextManager[None]
]
"""A context each call of a method runs in, given the call's context."""

_KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


def around(
    handler: grpc.RpcMethodHandler[Any, Any], context_of: Around
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` with its method running inside ``context_of(context)`` on every call
    (entered before the method runs, left when it has ended, however it ended)."""
    kind = next(k for k in _KINDS if getattr(handler, k) is not None)
    behavior = getattr(handler, kind)
    wrapped: Callable[..., Any]
    if inspect.isasyncgenfunction(behavior):

        async def stream(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async with context_of(context):
                async for item in behavior(request, context):
                    yield item

        wrapped = stream
    else:

        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            async with context_of(context):
                return await behavior(request, context)

        wrapped = call
    return handler._replace(**{kind: wrapped})  # type: ignore[attr-defined,no-any-return]


def service_of(details: grpc.HandlerCallDetails) -> str:
    """The full name of the service a call is for (``vehicle.ess.v1.EventService``)."""
    return details.method.rsplit("/", 2)[-2]
