"""The drain's credit rule: ``allocate`` against the rule taken one event at a time."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given
from vehicle_middleware.ess.scheduler import CreditScheduler


def one_at_a_time(
    weights: tuple[int, ...], credits: list[int], room: int, lengths: list[int]
) -> list[int]:
    """The rule as the module's doc says it, per event: the first queue with events
    and credit gives one; when no queue with events has credit, all are refilled."""
    counts = [0] * len(lengths)
    avail = list(lengths)
    for _ in range(room):
        if not any(avail):
            break
        if not any(n and c for n, c in zip(avail, credits, strict=True)):
            credits[:] = weights
        q = next(q for q, n in enumerate(avail) if n and credits[q])
        counts[q] += 1
        avail[q] -= 1
        credits[q] -= 1
    return counts


drains = st.lists(
    st.tuples(
        st.integers(0, 40),
        st.lists(st.one_of(st.just(0), st.integers(0, 60)), min_size=3, max_size=3),
    ),
    min_size=1,
    max_size=8,
)


@given(weights=st.tuples(*[st.integers(1, 13)] * 3), drains=drains)
def test_allocate_splits_and_spends_credit_as_the_rule_per_event(
    weights: tuple[int, int, int], drains: list[tuple[int, list[int]]]
) -> None:
    """Across drains (credits persist), both with one busy queue (allocate's short
    way) and with several."""
    scheduler = CreditScheduler(weights)
    credits = list(weights)
    for room, lengths in drains:
        assert scheduler.allocate(room, lengths) == one_at_a_time(weights, credits, room, lengths)
        assert scheduler.credits == tuple(credits)
