"""The process's budget of stream writes per second (pure: the clock is given).

A write to an app's stream costs about the same whatever it carries: gRPC's
CPU per write is many times the middleware's per event in it (figures in
BENCHMARKS.md). With many apps each getting a few events per
provider message, the number of writes, not of events, sets what delivery
costs: 100 apps at 200 writes a second are 20,000 stream writes a second, and
every event then waits behind the others.

:class:`WritePace` keeps the stream writes of all apps within ``per_s`` a
second, with a burst of ``burst_s`` seconds' worth at once. Before each
write a delivery loop takes the next turn and, if it is not now, waits for
it; meanwhile its queues collect what arrives, and the turn drains it all in
one write. Nothing else changes: the drop rule and each key's seq are the
queues', and a write still carries at most ``batch_max`` events. Within the
budget every turn is at once, so a lightly loaded middleware never waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["DEFAULT_BURST_S", "WritePace"]

DEFAULT_BURST_S: Final = 0.01
"""Turns taken at once after a quiet spell: 10 ms of the budget (50 at the default 5,000/s)."""


class WritePace:
    """Turns for stream writes, at most ``per_s`` a second (0: no budget, always now).

    A generic cell-rate scheme: each turn is ``1 / per_s`` after the previous
    one, and the schedule may run up to ``burst_s`` behind the clock (credit
    for a quiet spell, at most that much).
    """

    __slots__ = ("_burst", "_clock", "_gap", "_next")

    def __init__(
        self,
        per_s: int,
        *,
        burst_s: float = DEFAULT_BURST_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_s < 0:
            raise ValueError(f"writes per second must be >= 0 (0: no budget), got {per_s}")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s}")
        self._gap = 1.0 / per_s if per_s else 0.0
        self._burst = burst_s
        self._clock = clock
        self._next = 0.0

    def turn(self) -> float:
        """Take the next turn: how many seconds until it comes (0.0: now)."""
        if not self._gap:
            return 0.0
        now = self._clock()
        earliest = now - self._burst
        if self._next < earliest:
            self._next = earliest  # a quiet spell earns at most the burst
        wait = self._next - now
        self._next += self._gap
        return wait if wait > 0.0 else 0.0
