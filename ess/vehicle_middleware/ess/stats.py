"""What the ESS can say about an app's queues, for an operator (metrics, ``top``).

Snapshots, made on request from counters the queues keep anyway (see
:mod:`vehicle_middleware.ess.queues`): nothing here is on the delivery path.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AppStats", "QueueStats"]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of one app, now. Counts run from when the app's stream first
    opened (a reopened stream keeps them); the high-water mark from the last
    (re)configuration of the queue."""

    queue: int
    depth: int
    """Events queued now."""
    high_water: int
    """Most events queued at once."""
    min_length: int
    max_length: int
    delivered: int
    """Events drained for the app's stream."""
    evicted: int
    """Events the drop rule removed for a newer event of the same key."""
    lost: int
    """Events that met a full queue holding no event of their key."""
    discarded: int
    """Queued events thrown away by a deregistration, a key removal or a reopened stream."""
    oldest_age_ns: int
    """How long ago the oldest queued event was written (0 when empty)."""


@dataclass(frozen=True, slots=True)
class AppStats:
    """One app with an open event stream, now."""

    app: str
    queues: tuple[QueueStats, QueueStats, QueueStats]
    subscriptions: int
    lifecycle_pending: int
    """Key added/removed events waiting for the app."""
    reserved: int
    """Units of the event budget the app's ``min_length`` values reserve."""

    @property
    def delivered(self) -> int:
        return sum(q.delivered for q in self.queues)

    @property
    def evicted(self) -> int:
        return sum(q.evicted for q in self.queues)

    @property
    def lost(self) -> int:
        return sum(q.lost for q in self.queues)

    @property
    def discarded(self) -> int:
        return sum(q.discarded for q in self.queues)

    @property
    def depth(self) -> int:
        return sum(q.depth for q in self.queues)

    @property
    def oldest_age_ns(self) -> int:
        return max(q.oldest_age_ns for q in self.queues)
