"""The one loop timer that sends what filters hold when their interval ends.

The ESS core reads no clock of its own and runs no timer: it says when the
earliest held event is due (:meth:`vehicle_middleware.ess.EventSubSystem.next_due`,
and its ``on_due`` hook when a new one is earlier) and sends what is due when
asked (:meth:`~vehicle_middleware.ess.EventSubSystem.flush_due`). This arms one
``call_at`` on the event loop for the earliest due time and re-arms it for the
next; with nothing held, no timer runs.

The ESS's filters clock is ``time.monotonic_ns``, the clock of the default event
loop's ``time()``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from vehicle_middleware.ess import EventSubSystem

__all__ = ["FilterTimer"]

_NS_PER_S = 1e9


class FilterTimer:
    """Arms the event loop for the ESS's held events (see the module)."""

    __slots__ = ("_armed", "_clock", "_ess", "_handle")

    def __init__(
        self, ess: EventSubSystem, *, clock: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self._ess = ess
        self._clock = clock
        self._handle: asyncio.TimerHandle | None = None
        self._armed = 0
        """The due time (ns) the timer is armed for."""
        ess.on_due(self.due)

    def due(self, due_ns: int) -> None:
        """A held event is due at ``due_ns``: arm for it unless armed earlier. Called on
        the loop's thread (the write path)."""
        if self._handle is not None:
            if self._armed <= due_ns:
                return
            self._handle.cancel()
        self._arm(due_ns)

    def _arm(self, due_ns: int) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a write outside the server's loop: nothing to arm
            return
        self._armed = due_ns
        self._handle = loop.call_at(due_ns / _NS_PER_S, self._fire)

    def _fire(self) -> None:
        self._handle = None
        # The loop runs a timer up to its clock's resolution early: it is due.
        self._ess.flush_due(max(self._clock(), self._armed))
        following = self._ess.next_due()
        if following is not None:
            self._arm(following)

    def close(self) -> None:
        """Stop the timer (the server is stopping). Idempotent."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._ess.on_due(None)
