"""A caller's token expiring during a stream: one timer per call, for every API.

The identity interceptor (:mod:`vehicle_middleware.server.rpc.identity`) arms :func:`armed` around
every streaming call of a caller whose token expires: the own event and Publish
streams, KUKSA's ``Subscribe``, ``OpenProviderStream`` and ``ProvideActuators``,
the journal's ``Follow``, the actuators' stream, a peer's link. At expiry a handler
that ends its stream itself registered how with :func:`on_expiry` (a subscriber
session, which then says why to the app and in the journal); any other call is
cancelled, and the interceptor ends it UNAUTHENTICATED. No handler keeps a timer of
its own, so a new API cannot forget it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Expiry", "armed", "on_expiry"]


class Expiry:
    """The expiry of one call's token: whether it came, and whether a handler took it."""

    __slots__ = ("_callback", "_task", "fired", "handled")

    def __init__(self, task: asyncio.Task[object] | None) -> None:
        self._task = task
        self._callback: Callable[[], None] | None = None
        self.fired = False
        """The token expired during the call."""
        self.handled = False
        """A handler's own callback ended the stream (else the call was cancelled)."""

    def handle(self, callback: Callable[[], None]) -> None:
        """End the stream with ``callback`` at expiry, instead of cancelling the call."""
        self._callback = callback

    def fire(self) -> None:
        self.fired = True
        if self._callback is not None:
            self.handled = True
            self._callback()
        elif self._task is not None:
            self._task.cancel()


_CURRENT: ContextVar[Expiry | None] = ContextVar("vmw_expiry", default=None)


@contextmanager
def armed(expires_at: float) -> Iterator[Expiry]:
    """Run the current task's call until ``expires_at`` (seconds since the epoch)."""
    expiry = Expiry(asyncio.current_task())
    loop = asyncio.get_running_loop()
    timer = loop.call_later(max(0.0, expires_at - time.time()), expiry.fire)
    reset = _CURRENT.set(expiry)
    try:
        yield expiry
    finally:
        timer.cancel()
        _CURRENT.reset(reset)


def on_expiry(callback: Callable[[], None]) -> bool:
    """End this call's stream with ``callback`` when its caller's token expires,
    instead of having the call cancelled. False when nothing is armed (a caller
    without a token that expires)."""
    expiry = _CURRENT.get()
    if expiry is None:
        return False
    expiry.handle(callback)
    return True
