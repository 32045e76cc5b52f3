"""Telling providers their keys' demand: batched, rate-limited, per provider.

The ESS keeps each key's demand (:mod:`vehicle_middleware.ess.demand`). The
:class:`DemandPublisher` hands its changes to the providers that follow them
(``WatchDemand`` streams, KUKSA ``OpenProviderStream``): each registers a
:class:`DemandWatch` on its keys. When the demand of some key changes, the
publisher takes the changes once the interval since its last take has passed
(at once after a quiet interval) and gives each watch the changes of its keys
in one batch. Nothing runs while nothing changes: the take is a timer armed by
the first change after a take.

A watch holds only what its reader has not taken yet, merged by key, so a slow
reader holds at most one demand per key and reads the latest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from vehicle_middleware.ess import DemandTracker, KeyDemand
from vehicle_middleware.server.metrics.collectors import Figure

__all__ = ["DemandPublisher", "DemandWatch"]


class DemandWatch:
    """The demand of one provider's keys, as its reader has yet to be told it.

    Created by :meth:`DemandPublisher.watch` with the demand now of every key
    pending, so the first :meth:`next` returns all of them.
    """

    __slots__ = ("_pending", "_ready", "_told", "keys")

    def __init__(self, keys: Mapping[int, str], now: Callable[[int], KeyDemand]) -> None:
        self.keys: dict[int, str] = {}
        """Key id -> name, in the order the provider named them."""
        self._told: dict[int, KeyDemand] = {}
        self._pending: dict[int, KeyDemand] = {}
        self._ready = asyncio.Event()
        self.add(keys, now)

    def add(self, keys: Mapping[int, str], now: Callable[[int], KeyDemand]) -> None:
        """Follow ``keys`` too: their demand now is pending (told again for a key
        followed already)."""
        for key, name in keys.items():
            self.keys[key] = name
            self._pending[key] = now(key)
        if self._pending:
            self._ready.set()

    def offer(self, changes: Mapping[int, KeyDemand]) -> None:
        """Merge changes of the demand (of any keys: others are ignored)."""
        for key, demand in changes.items():
            if key not in self.keys:
                continue
            if self._told.get(key) == demand:
                self._pending.pop(key, None)  # changed and back before the reader took it
            else:
                self._pending[key] = demand
        if self._pending:
            self._ready.set()

    async def next(self) -> dict[int, KeyDemand]:
        """Wait for demand the reader has not been told, and take it (key -> demand)."""
        while not self._pending:
            self._ready.clear()
            await self._ready.wait()
        taken, self._pending = self._pending, {}
        self._told.update(taken)
        return taken


class DemandPublisher:
    """Takes the ESS's demand changes at most once per interval and tells the watches."""

    def __init__(
        self,
        tracker: DemandTracker,
        *,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``tracker``: the ESS's (``EventSubSystem.demand``); ``interval_s``: the
        shortest time between two takes (``demand_interval_s``)."""
        self._tracker = tracker
        self._interval = interval_s
        self._clock = clock
        self._watches: dict[int, set[DemandWatch]] = {}
        """Key id -> the watches of that key."""
        self._timer: asyncio.TimerHandle | None = None
        self._last_take = float("-inf")
        self.batches = 0
        """Takes that changed some key's demand (for the metrics and tests)."""
        self._watching = 0
        self.filter_errors = 0
        """Filter updates a KUKSA provider answered with an error."""
        tracker.on_pending = self._changed

    def watch(self, keys: Mapping[int, str]) -> DemandWatch:
        """Follow the demand of ``keys`` (id -> name); end with :meth:`unwatch`. O(keys)."""
        watch = DemandWatch(keys, self._tracker.demand)
        self._watching += 1
        for key in watch.keys:
            self._watches.setdefault(key, set()).add(watch)
        return watch

    def extend(self, watch: DemandWatch, keys: Mapping[int, str]) -> None:
        """Have ``watch`` follow ``keys`` too (their demand now is told next). O(keys)."""
        watch.add(keys, self._tracker.demand)
        for key in keys:
            self._watches.setdefault(key, set()).add(watch)

    def unwatch(self, watch: DemandWatch) -> None:
        """Stop telling ``watch``. Idempotent. O(its keys)."""
        known = False
        for key in watch.keys:
            watches = self._watches.get(key)
            if watches is not None and watch in watches:
                known = True
                watches.discard(watch)
                if not watches:
                    del self._watches[key]
        if known:
            self._watching -= 1

    def figures(self) -> list[Figure]:
        """The publisher's figures, for the metrics (a collector)."""
        return [
            Figure(
                "vmw_demand_watches",
                "Providers' streams following their keys' demand (WatchDemand, KUKSA filters).",
                "gauge",
                (),
                self._watching,
            ),
            Figure(
                "vmw_demand_batches_total",
                "Batches of demand changes told to the providers.",
                "counter",
                (),
                self.batches,
            ),
            Figure(
                "vmw_provider_filter_errors_total",
                "Filter updates a KUKSA provider answered with an error.",
                "counter",
                (),
                self.filter_errors,
            ),
        ]

    def close(self) -> None:
        """Stop taking changes (the server is stopping)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._tracker.on_pending = None

    def _changed(self) -> None:
        """The tracker's hook: the first change since the last take. Arms the take."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a change made outside the server's loop: told at once
            self._take()
            return
        delay = max(0.0, self._last_take + self._interval - self._clock())
        self._timer = loop.call_later(delay, self._take)

    def _take(self) -> None:
        self._timer = None
        self._last_take = self._clock()
        changes = self._tracker.take_changes()
        if not changes:
            return
        self.batches += 1
        told: set[DemandWatch] = set()
        for key in changes:
            told.update(self._watches.get(key, ()))
        for watch in told:
            watch.offer(changes)
