"""The calls in progress, so a stopping server can end them in order.

gRPC's own ``server.stop(grace)`` ends every call at once when the grace
runs out. The middleware needs one more step: every call that can still
produce a journal record (providers' streams, apps' streams, unary writes,
peer links) ends first; then the journal writes its ``stop`` record; then the
journal's own followers get that record, and only then do their calls end.
:class:`Calls` keeps the task of each call in progress, except those of the
services it is told to spare, and :meth:`Calls.end` ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc

__all__ = ["Calls"]

_KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


class Calls(grpc.aio.ServerInterceptor):
    """Tracks the task of every call in progress except those of ``spared`` services
    (full service names)."""

    def __init__(self, spared: Iterable[str] = ()) -> None:
        self._spared = frozenset(spared)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def count(self) -> int:
        """Calls in progress, tracked. (Not ``__len__``: grpc drops an interceptor
        that is false, and every one after it, from the chain.)"""
        return len(self._tasks)

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        if handler_call_details.method.rsplit("/", 2)[-2] in self._spared:
            return handler
        kind = next(k for k in _KINDS if getattr(handler, k) is not None)
        return handler._replace(**{kind: self._tracked(getattr(handler, kind))})  # type: ignore[attr-defined,no-any-return]

    def _enter(self) -> asyncio.Task[Any] | None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            self._idle.clear()
        return task

    def _leave(self, task: asyncio.Task[Any] | None) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self._idle.set()

    def _tracked(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                task = self._enter()
                try:
                    async for item in behavior(request, context):
                        yield item
                finally:
                    self._leave(task)

            return stream

        async def call(request: Any, context: Any) -> Any:
            task = self._enter()
            try:
                return await behavior(request, context)
            finally:
                self._leave(task)

        return call

    async def end(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the tracked calls to end, then cancel those
        left (as ``server.stop(grace)`` would) and wait (up to ``grace`` again) until
        they are gone."""
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except TimeoutError:
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)
