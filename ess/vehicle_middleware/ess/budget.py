"""The global event budget shared by every app's queues.

The budget is a number of queued ``data_updated`` events, in two parts:

- reservations: opening a stream reserves the sum of the app's ``min_length``
  values; a queue holding fewer events than its ``min_length`` uses its
  reservation. So every app always has its minimum.
- the shared part: every event above a queue's ``min_length`` takes one unit
  of it, while it has room (the queues' hot path: one integer test).

``reserve`` units of the budget can be held back for reservations: while the
reservations take less than that, the rest of it stays free for the
reservations still to come, and queues growing above their minimums never
take it. The middleware holds back every app's share of reservations
(``max_apps`` x ``event_budget_per_app``), so however full the others' queues
grow, an app within its share always has room for its minimums. With
``reserve`` 0 reservations and growth take from one pool.

No app together with all others can hold more than the budget.
"""

from __future__ import annotations

__all__ = ["EventBudget"]


class EventBudget:
    """Counter of free units of the global event budget.

    ``free`` is public and mutated by the queues on their hot path (one
    integer update per event above ``min_length``): the units queues may
    still grow into. Reservations change it only through :meth:`reserve` and
    :meth:`release`; the ESS checks the whole accounting in its ``check()``.

    Invariant: ``free == total - max(reserved, reserve) - (events above minimums)``.
    """

    __slots__ = ("free", "reserve_floor", "reserved", "total")

    def __init__(self, total: int, *, reserve: int = 0) -> None:
        if total < 0:
            raise ValueError(f"event budget must be >= 0, got {total}")
        if not 0 <= reserve <= total:
            raise ValueError(f"the reserve must be in 0..{total} (the budget), got {reserve}")
        self.total = total
        self.reserve_floor = reserve
        """Units held back for reservations (see the module)."""
        self.reserved = 0
        """Units reserved by open streams (their ``min_length`` values)."""
        self.free = total - reserve

    @property
    def held(self) -> int:
        """Units of the reserve not reserved yet: free for reservations only."""
        return max(0, self.reserve_floor - self.reserved)

    def room(self, *, releasing: int = 0) -> int:
        """Units a reservation may take now, or once ``releasing`` units of the
        reservations are released (a stream that replaces another)."""
        held = max(0, self.reserve_floor - (self.reserved - releasing))
        return self.free + releasing - (held - self.held) + held

    def reserve(self, units: int) -> bool:
        """Take ``units`` for a reservation if that many are free; return whether it did."""
        if units > self.room():
            return False
        held = self.held
        self.reserved += units
        self.free -= units - (held - self.held)
        return True

    def release(self, units: int) -> None:
        """Give back ``units`` reserved before."""
        held = self.held
        self.reserved -= units
        assert self.reserved >= 0, "budget released more than it reserved"
        self.free += units - (self.held - held)
        assert self.free + self.held <= self.total, "budget released more than it reserved"

    @property
    def used(self) -> int:
        """Units reserved or in use."""
        return self.total - self.free - self.held
