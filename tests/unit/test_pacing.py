"""The budget of stream writes (``vehicle_middleware.server.pacing``), on a clock the test moves."""

from __future__ import annotations

import pytest
from vehicle_middleware.server.pacing import WritePace


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_no_budget_never_waits() -> None:
    pace = WritePace(0, clock=Clock())
    assert [pace.turn() for _ in range(1000)] == [0.0] * 1000


def test_beyond_the_burst_each_turn_comes_one_gap_after_the_last() -> None:
    clock = Clock()
    pace = WritePace(100, burst_s=0.05, clock=clock)  # 5 turns of credit, then 10 ms apart
    waits = [pace.turn() for _ in range(9)]
    assert waits == pytest.approx([0.0] * 6 + [0.01, 0.02, 0.03])


def test_turns_within_the_budget_are_at_once() -> None:
    clock = Clock()
    pace = WritePace(100, burst_s=0.0, clock=clock)
    for _ in range(50):
        assert pace.turn() == 0.0
        clock.now += 0.01  # exactly the budget's pace
    clock.now += 0.005
    assert pace.turn() == 0.0


def test_a_quiet_spell_earns_no_more_than_the_burst() -> None:
    clock = Clock()
    pace = WritePace(100, burst_s=0.02, clock=clock)
    clock.now += 3600.0  # an hour without writes
    waits = [pace.turn() for _ in range(5)]
    assert waits == pytest.approx([0.0] * 3 + [0.01, 0.02])


def test_waiting_turns_catch_up_as_the_clock_moves() -> None:
    clock = Clock()
    pace = WritePace(10, burst_s=0.0, clock=clock)
    assert [pace.turn() for _ in range(3)] == pytest.approx([0.0, 0.1, 0.2])
    clock.now += 0.25  # the three have come; the next turn is 0.3 after the first
    assert pace.turn() == pytest.approx(0.05)


@pytest.mark.parametrize(("per_s", "burst_s"), [(-1, 0.01), (10, -0.5)])
def test_a_negative_budget_or_burst_is_refused(per_s: int, burst_s: float) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        WritePace(per_s, burst_s=burst_s)
