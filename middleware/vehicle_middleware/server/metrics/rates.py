"""Writes per second of every key, from the V-Store's versions (no hot-path cost).

A key's version counts its writes, so two copies of the version table, taken
``window`` seconds apart, give every key's writes in that window. A reading
within ``min_interval`` of the last sample reuses it: a Prometheus scrape and a
``top`` refreshing every second share one window instead of shortening each
other's. A sample copies the table (one C-level copy, 100,000 keys in about a
millisecond); picking the busiest keys is O(keys log n).
"""

from __future__ import annotations

import heapq
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass

from vehicle_middleware.vstore import VStore

__all__ = ["KeyRates", "RateSample"]


@dataclass(frozen=True, slots=True)
class RateSample:
    """Versions now and in the sample before, and the seconds between them."""

    versions: list[int]
    previous: list[int]
    window_s: float

    def writes(self, key_id: int) -> int:
        """Writes of ``key_id`` in the window.

        A key removed and added again (its id reused) restarts at version 0:
        then its writes since it was added.
        """
        now = self.versions[key_id] if key_id < len(self.versions) else -1
        if now < 0:
            return 0
        before = self.previous[key_id] if key_id < len(self.previous) else 0
        return now - before if before >= 0 and now >= before else now

    def per_second(self, key_id: int) -> float:
        return self.writes(key_id) / self.window_s if self.window_s > 0 else 0.0

    def busiest(self, n: int) -> list[int]:
        """Ids of the (at most) ``n`` keys written most in the window, most first;
        keys not written are left out."""
        if n <= 0:
            return []
        deltas = list(map(operator.sub, self.versions, self.previous))
        # Ids beyond the previous table (keys added since) count from 0.
        deltas.extend(self.versions[len(self.previous) :])
        if min(deltas, default=0) < 0:  # rare: an id reused since (its version restarted)
            versions = self.versions
            for i in [i for i, d in enumerate(deltas) if d < 0]:
                deltas[i] = max(0, versions[i])
        top = heapq.nlargest(n, range(len(deltas)), key=deltas.__getitem__)
        picked = [(self.writes(i), i) for i in top if deltas[i] > 0]
        picked.sort(key=lambda wi: (-wi[0], wi[1]))
        return [i for w, i in picked if w > 0]


class KeyRates:
    """Samples the store's versions, at most once per ``min_interval`` seconds."""

    def __init__(
        self,
        store: VStore,
        *,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._min_interval = min_interval
        self._clock = clock
        self._versions = store.versions()
        self._at = clock()
        self._sample: RateSample | None = None

    def sample(self) -> RateSample:
        """The latest sample: a new one if the last is ``min_interval`` old.

        The first covers the time since this object was made (the server's start).
        """
        now = self._clock()
        if self._sample is None or now - self._at >= self._min_interval:
            versions = self._store.versions()
            self._sample = RateSample(versions, self._versions, max(0.0, now - self._at))
            self._versions, self._at = versions, now
        return self._sample
