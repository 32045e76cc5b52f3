"""The global event budget shared by every app's queues.

The budget is a number of queued ``data_updated`` events. Opening a stream
reserves the sum of the app's ``min_length`` values; a queue holding fewer
events than its ``min_length`` uses its reservation, and every event above it
takes one unit from the shared remainder. So every app always has its minimum,
and no app together with all others can hold more than the budget.
"""

from __future__ import annotations

__all__ = ["EventBudget"]


class EventBudget:
    """Counter of free units of the global event budget.

    ``free`` is public and mutated by the queues on their hot path (one
    integer update per event above ``min_length``); the ESS checks the whole
    accounting in its ``check()``.
    """

    __slots__ = ("free", "total")

    def __init__(self, total: int) -> None:
        if total < 0:
            raise ValueError(f"event budget must be >= 0, got {total}")
        self.total = total
        self.free = total

    def reserve(self, units: int) -> bool:
        """Take ``units`` if that many are free; return whether it did."""
        if units > self.free:
            return False
        self.free -= units
        return True

    def release(self, units: int) -> None:
        """Give back ``units`` taken before."""
        self.free += units
        assert self.free <= self.total, "budget released more than it reserved"

    @property
    def used(self) -> int:
        """Units reserved or in use."""
        return self.total - self.free
