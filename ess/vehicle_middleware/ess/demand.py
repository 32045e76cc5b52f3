"""Demand: per key, whether anyone watches it and how often it is wanted.

A provider that knows its keys' demand can stop sampling what nobody watches
and sample the rest no faster than asked. :class:`DemandTracker` derives each
key's :class:`KeyDemand` from the subscription table:

* ``watched``: the key has at least one subscriber;
* ``min_interval_ns``: the shortest interval any subscriber's filter asks; 0
  when some subscriber wants every write (no filter, or a filter without an
  interval), and 0 for an unwatched key;
* ``shortest_asked_ns``: the shortest interval any subscriber's filter asks,
  whether or not another wants every write (0: none asks one). A KUKSA provider
  is told it beside the interval it declared (the databroker's rule).

The table tells the tracker which key's subscribers changed
(:meth:`DemandTracker.changed`); the tracker recomputes that key's demand and
remembers it as dirty only if it differs. :meth:`DemandTracker.take_changes`
hands over the keys whose demand differs from what the last take published, so
a caller that takes at a bounded rate batches any churn into at most one
change per key and take. No clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.ess.subscriptions import Subscription

__all__ = ["UNWATCHED", "DemandTracker", "KeyDemand", "demand_of"]


@dataclass(frozen=True, slots=True)
class KeyDemand:
    """What the subscribers of one key ask of its provider.

    Attributes:
        watched: some app subscribes to the key.
        min_interval_ns: the shortest interval a subscriber asks, in ns; 0: some
            subscriber wants every write (always 0 when not watched).
        shortest_asked_ns: the shortest interval a subscriber's filter asks, in
            ns, even where another subscriber wants every write; 0: none asks one.
    """

    watched: bool
    min_interval_ns: int = 0
    shortest_asked_ns: int = 0


UNWATCHED: Final = KeyDemand(False, 0, 0)
"""The demand of a key nobody subscribes to."""


def demand_of(subscribers: Mapping[str, Subscription] | None) -> KeyDemand:
    """The demand of a key with these subscribers (None or empty: unwatched).

    O(subscribers).
    """
    if not subscribers:
        return UNWATCHED
    every_write = False
    lowest = 0
    for sub in subscribers.values():
        f = sub.filter
        interval = f.min_interval_ns if f is not None else 0
        if interval == 0:
            every_write = True
        elif lowest == 0 or interval < lowest:
            lowest = interval
    return KeyDemand(True, 0 if every_write else lowest, lowest)


class DemandTracker:
    """Every key's demand, kept in step with a subscription table, and its changes.

    ``by_key`` is the table's key id -> app -> subscription map (read, never
    written). The tracker holds the demand of watched keys only: a key it does
    not hold is :data:`UNWATCHED`.
    """

    __slots__ = ("_by_key", "_current", "_dirty", "_published", "on_pending")

    def __init__(self, by_key: Mapping[int, Mapping[str, Subscription]]) -> None:
        self._by_key = by_key
        self._current: dict[int, KeyDemand] = {}
        """Demand of every watched key, as of the table now."""
        self._published: dict[int, KeyDemand] = {}
        """Demand of every key that was watched at the last take, as it was published."""
        self._dirty: set[int] = set()
        """Keys whose demand changed since the last take (maybe back to the published one)."""
        self.on_pending: Callable[[], None] | None = None
        """Told when a key's demand changes and none had since the last take: the
        moment to arrange the next take."""

    def changed(self, key: int) -> None:
        """The subscribers of ``key`` changed: recompute its demand. O(its subscribers).

        Idempotent: a call that finds the demand unchanged marks nothing.
        """
        new = demand_of(self._by_key.get(key))
        old = self._current.get(key, UNWATCHED)
        if new == old:
            return
        if new.watched:
            self._current[key] = new
        else:
            del self._current[key]
        was_clean = not self._dirty
        self._dirty.add(key)
        if was_clean and self.on_pending is not None:
            self.on_pending()

    def demand(self, key: int) -> KeyDemand:
        """The key's demand now. O(1)."""
        return self._current.get(key, UNWATCHED)

    @property
    def pending(self) -> bool:
        """Whether some key's demand changed since the last take (it may have changed
        back: :meth:`take_changes` may still return nothing). O(1)."""
        return bool(self._dirty)

    def take_changes(self) -> dict[int, KeyDemand]:
        """The keys whose demand differs from the last take's, with their demand now.

        A key whose demand changed and changed back since the last take is not
        in it. After the call, the demand now is what is published.
        O(keys changed since the last take).
        """
        out: dict[int, KeyDemand] = {}
        current = self._current
        published = self._published
        for key in sorted(self._dirty):
            now = current.get(key, UNWATCHED)
            if published.get(key, UNWATCHED) == now:
                continue
            out[key] = now
            if now.watched:
                published[key] = now
            else:
                del published[key]
        self._dirty.clear()
        return out

    def check(self) -> None:
        """Assert the tracker agrees with the table (for tests)."""
        assert set(self._current) == set(self._by_key), "demand kept for unwatched keys"
        for key, subs in self._by_key.items():
            assert self._current[key] == demand_of(subs), f"stale demand of key {key}"
        for key, now in self._published.items():
            assert now.watched, f"unwatched demand published as held for key {key}"
        for key in set(self._current) | set(self._published):
            if self._current.get(key, UNWATCHED) != self._published.get(key, UNWATCHED):
                assert key in self._dirty, f"change of key {key} not marked"
