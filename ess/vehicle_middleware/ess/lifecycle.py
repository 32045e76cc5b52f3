"""The per-app buffer of lifecycle events (``KeyAdded``/``KeyRemoved``) and of
health events (``KeyStale``/``KeyFresh``, ``ProviderGone``/``ProviderBack``).

These events are never evicted by the drop rule: lifecycle events tell the app
which ids mean which keys, and ids are recycled; health events say that a
key's silence is a fault, not a steady value, and are rare (one per key and
transition). The buffer is bounded; when an event
does not fit, the buffered ones are dropped too and the app is flagged for a
resync: its next batch starts with ``ResyncRequired(lost=n)``, after which it
must list the keys and its subscriptions again. Until that flag is delivered,
further lifecycle events are only counted: the app's re-listing, which happens
after it sees the flag, covers them. Health events lost with them are told
again where they still hold: a key still stale gets a new ``KeyStale`` after
the resync, and ``no_provider`` in Get and Register results says which keys
have no provider.
"""

from __future__ import annotations

from collections import deque

from vehicle_middleware.ess.events import LifecycleEvent, RawEvent, ResyncRequired

__all__ = ["LifecycleBuffer"]


class LifecycleBuffer:
    """Bounded FIFO of lifecycle events with a resync flag."""

    __slots__ = ("_events", "capacity", "lost")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"lifecycle capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._events: deque[LifecycleEvent] = deque()
        self.lost = 0
        """Lifecycle events not delivered since the last resync; > 0 means a resync is owed."""

    def __len__(self) -> int:
        """Events a drain would return, counting the resync flag as one."""
        return len(self._events) + (1 if self.lost else 0)

    def push(self, event: LifecycleEvent) -> None:
        """Buffer an event, or count it lost and owe the app a resync."""
        if self.lost:
            self.lost += 1
        elif len(self._events) >= self.capacity:
            self.lost = len(self._events) + 1
            self._events.clear()
        else:
            self._events.append(event)

    def discard(self) -> None:
        """Drop the buffered events; if there were any, the app is owed a resync."""
        if self._events:
            self.lost += len(self._events)
            self._events.clear()

    def drain_into(self, out: list[RawEvent], room: int) -> None:
        """Move up to ``room`` events to ``out``: the resync flag first, if owed."""
        if room <= 0:
            return
        if self.lost:
            out.append(ResyncRequired(self.lost))
            self.lost = 0
            room -= 1
        events = self._events
        for _ in range(min(room, len(events))):
            out.append(events.popleft())

    def check(self) -> None:
        """Assert the buffer's invariants (for tests)."""
        assert len(self._events) <= self.capacity
        assert self.lost >= 0
        assert not (self.lost and self._events), "events buffered while a resync is owed"
