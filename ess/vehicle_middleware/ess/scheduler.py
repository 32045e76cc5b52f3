"""Which queues a drain takes events from: priority with a starvation bound.

Rule (per app, state kept across drains): each queue has a credit, refilled
to its weight, default ``(12, 3, 1)``. A drain serves the highest-priority
queue that has both events and credit, as many events as both allow, and
repeats; when no queue with events has credit left, all credits are refilled.
Events of queue 0 go before 1 before 2 in the returned batch.

So an idle queue costs the others nothing (the rule is work-conserving), and
when all three queues are backlogged, queue 0 gets 12/16 of the delivered
events, queue 1 3/16 and queue 2 at least 1/16: queue 2 is never starved,
whatever the batch size (even 1, because credits persist across drains).
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_WEIGHTS", "CreditScheduler"]

DEFAULT_WEIGHTS: Final = (12, 3, 1)


class CreditScheduler:
    """Splits a batch of ``room`` events among the queues by credit."""

    __slots__ = ("_credits", "_weights")

    def __init__(self, weights: tuple[int, ...] = DEFAULT_WEIGHTS) -> None:
        if not weights or any(w < 1 for w in weights):
            raise ValueError(f"every queue weight must be >= 1, got {weights}")
        self._weights = weights
        self._credits = list(weights)

    def allocate(self, room: int, lengths: list[int]) -> list[int]:
        """How many events to take from each queue, given their lengths.

        Returns a list of counts, one per queue, summing to
        ``min(room, sum(lengths))``. Complexity: O(queues * refills).
        """
        credits = self._credits
        counts = [0] * len(lengths)
        total = sum(lengths)
        if room <= 0 or not total:
            return counts
        for q, n in enumerate(lengths):
            if n == total:  # one queue holds every event: its credit only counts
                take = counts[q] = min(n, room)
                self._spend(q, take)
                return counts
        avail = list(lengths)
        while room > 0:
            for q, n in enumerate(avail):
                if n and credits[q]:
                    take = min(n, credits[q], room)
                    counts[q] += take
                    avail[q] -= take
                    credits[q] -= take
                    room -= take
                    break
            else:
                if not any(avail):
                    break
                credits[:] = self._weights
        return counts

    def _spend(self, q: int, take: int) -> None:
        """The credits after ``take`` events from queue ``q`` alone, as the loop of
        :meth:`allocate` leaves them (a refill each time ``q``'s credit runs out
        with events still to take), in a few steps rather than one turn of the
        loop per refill."""
        credits = self._credits
        left = take - credits[q]
        if left <= 0:
            credits[q] -= take
            return
        weight = self._weights[q]
        refills = -(-left // weight)
        credits[:] = self._weights
        credits[q] = refills * weight - left

    def reset(self) -> None:
        """Forget the credit state (a new stream starts afresh)."""
        self._credits[:] = self._weights

    @property
    def credits(self) -> tuple[int, ...]:
        """Current credits (for tests and the reference model)."""
        return tuple(self._credits)
