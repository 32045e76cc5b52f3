"""The calls in progress, so a stopping server can end them in order.

gRPC's own ``server.stop(grace)`` ends every call at once when the grace
runs out. The middleware needs one more step: every call that can still
produce a journal record (providers' streams, apps' streams, unary writes,
peer links) ends first; then the journal writes its ``stop`` record; then the
journal's own followers get that record, and only then do their calls end.
:class:`CallTracker` keeps the task of each call in progress, except those of the
services it is told to spare, and :meth:`CallTracker.end` ends them. It also tells
their number as it changes (:class:`vehicle_middleware.server.memory_trim.MemoryTrim` watches it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import grpc
from vehicle_middleware.server.rpc.handlers import Continuation, around, service_of

__all__ = ["CallTracker"]


class CallTracker(grpc.aio.ServerInterceptor):
    """Tracks the task of every call in progress except those of ``spared`` services
    (full service names)."""

    def __init__(
        self, spared: Iterable[str] = (), on_count: Callable[[int], None] | None = None
    ) -> None:
        self._spared = frozenset(spared)
        self._on_count = on_count or (lambda _: None)
        """Told the number of tracked calls each time it changes."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def count(self) -> int:
        """Calls in progress, tracked. (Not ``__len__``: see
        :mod:`vehicle_middleware.server.rpc.handlers`.)"""
        return len(self._tasks)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        if service_of(handler_call_details) in self._spared:
            return handler
        return around(handler, self._tracked)

    @contextlib.asynccontextmanager
    async def _tracked(self, _: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[None]:
        task = asyncio.current_task()
        if task is None:
            yield
            return
        self._tasks.add(task)
        self._idle.clear()
        self._on_count(len(self._tasks))
        try:
            yield
        finally:
            self._tasks.discard(task)
            self._on_count(len(self._tasks))
            if not self._tasks:
                self._idle.set()

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
