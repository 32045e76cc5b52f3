"""Chains: the events of one node's process start, in order, and what is kept of them. Pure.

A node holds a chain's events contiguously from 1 (or from a *horizon*, see
below) up to ``held``; ``applied`` marks how far their fate is settled
(applied to the V-Store, or handed to a verdict). The events themselves are
*retained* only while the bounds allow (:class:`Retention`: a count, bytes
and an age, oldest first, settled ones only): what is gone is summarized by
the key states, and a peer that needs it gets those states and a horizon
(``first - 1`` and its hash: "the chain goes on from here") instead.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from replica.events import ChainId, Event

__all__ = ["Chain", "Held", "Retention"]


@dataclass(frozen=True, slots=True)
class Held:
    """A retained event and when this node got it (monotonic seconds)."""

    event: Event
    at: float


class Chain:
    """One chain as this node holds it."""

    __slots__ = (
        "applied",
        "base_hash",
        "events",
        "first",
        "held",
        "id",
        "last_hash",
        "last_stamp",
    )

    def __init__(self, chain_id: ChainId) -> None:
        self.id = chain_id
        self.held = 0
        """Every seq up to this is held (or summarized by a horizon)."""
        self.last_hash = b""
        """The hash of event ``held`` (the chain's leaf)."""
        self.last_stamp = 0
        self.applied = 0
        """Every seq up to this is settled."""
        self.events: dict[int, Held] = {}
        """Retained events: seqs ``first`` .. ``held``."""
        self.first = 1
        self.base_hash = b""
        """The hash of event ``first - 1`` (empty when ``first`` is 1)."""

    def hold(self, event: Event, at: float) -> None:
        """Hold the next event (the caller checked seq and prev). O(1)."""
        assert event.seq == self.held + 1
        assert event.prev == self.last_hash
        self.events[event.seq] = Held(event, at)
        self.held = event.seq
        self.last_hash = event.hash
        self.last_stamp = event.stamp

    def jump(self, seq: int, digest: bytes, stamp: int) -> bool:
        """A horizon: everything up to ``seq`` (hash ``digest``) is summarized.

        Only forward; returns whether anything changed.
        """
        if seq <= self.held:
            return False
        self.events.clear()
        self.held = self.applied = seq
        self.first = seq + 1
        self.last_hash = self.base_hash = digest
        self.last_stamp = stamp
        return True

    def evict_first(self) -> Held | None:
        """Forget the oldest retained event (settled ones only); None if it may not go."""
        if self.first > self.applied:
            return None
        held = self.events.pop(self.first)
        self.base_hash = held.event.hash
        self.first += 1
        return held

    def check(self) -> None:
        """Assert the invariants (for tests)."""
        assert 0 <= self.applied <= self.held
        assert 1 <= self.first <= self.held + 1
        assert set(self.events) == set(range(self.first, self.held + 1))
        prev = self.base_hash
        for seq in range(self.first, self.held + 1):
            event = self.events[seq].event
            assert event.seq == seq
            assert event.prev == prev
            assert event.chain == self.id
            prev = event.hash
        assert prev == self.last_hash


class Retention:
    """The retained events of every chain, oldest first, within bounds."""

    __slots__ = ("_order", "bytes", "max_age_ns", "max_bytes", "max_events")

    def __init__(self, *, max_events: int, max_bytes: int, max_age_ns: int) -> None:
        if max_events < 1 or max_bytes < 1 or max_age_ns < 1:
            raise ValueError("retention bounds must be >= 1")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_age_ns = max_age_ns
        self._order: deque[tuple[Chain, int]] = deque()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._order)

    def add(self, chain: Chain, event: Event) -> None:
        self._order.append((chain, event.seq))
        self.bytes += event.size

    def trim(self, now_ns: int) -> list[Event]:
        """Forget the oldest events beyond the bounds; returns them.

        Stops at an event not yet settled (it stays, even beyond the bounds:
        the model's pending bound limits those), and at the first event young
        enough once the count and bytes fit.
        """
        gone: list[Event] = []
        order = self._order
        while order:
            chain, seq = order[0]
            if seq < chain.first:  # a horizon jumped past it
                order.popleft()
                continue
            held = chain.events[seq]
            over = len(order) > self.max_events or self.bytes > self.max_bytes
            if not over and held.event.stamp >= now_ns - self.max_age_ns:
                break
            if chain.first != seq or chain.evict_first() is None:
                break
            order.popleft()
            self.bytes -= held.event.size
            gone.append(held.event)
        return gone

    def forget_chain(self, chain: Chain) -> None:
        """A horizon cleared ``chain``'s events: their bytes no longer count."""
        for held in chain.events.values():
            self.bytes -= held.event.size
