"""A KUKSA subscription's drained events cut into responses, in both implementations of
:class:`vehicle_middleware.server.codecs.Cut` (``vehicle_middleware.server.kuksa.response_cuts``,
and its reference twin in
``vehicle_middleware.server.kuksa.entries_reference``)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.ess import DataUpdated, Event, KeyAdded, ResyncRequired, as_row
from vehicle_middleware.server.codecs import Cut
from vehicle_middleware.server.kuksa import entries_reference
from vehicle_middleware.server.kuksa.response_cuts import cut

_DATA = st.builds(
    DataUpdated,
    key=st.integers(1, 4),
    seq=st.integers(1, 9),
    time_ns=st.integers(0, 9),
    data=st.sampled_from([b"a", b"b", b""]),
    queue=st.just(0),
    writes=st.integers(1, 3),  # more than 1: a filtered subscription's event
)
_LIFECYCLE = st.one_of(
    st.builds(KeyAdded, key=st.integers(1, 4), name=st.just("K")),
    st.builds(ResyncRequired, lost=st.integers(1, 3)),
)
# As a drain hands them out: lifecycle events first, then data events.
_DRAIN = st.tuples(st.lists(_LIFECYCLE, max_size=3), st.lists(_DATA, max_size=20)).map(
    lambda parts: [*parts[0], *parts[1]]
)
CUTS = [pytest.param(cut, id="fast"), pytest.param(entries_reference.cut, id="reference")]
"""Both implementations."""


@pytest.mark.parametrize("cut", CUTS)
@given(_DRAIN)
def test_a_batch_is_cut_where_a_key_repeats(cut: Cut, events: list[Event]) -> None:
    """In order, each key at most once a response, as few responses as that allows,
    every update the data event as its row (as drained: ``drain_raw``)."""
    responses = cut(events)
    data = [as_row(e) for e in events if type(e) is DataUpdated]
    assert [u for r in responses for u in r] == data
    for response in responses:
        assert len({u[0] for u in response}) == len(response)
    for before, after in itertools.pairwise(responses):
        assert after[0][0] in {u[0] for u in before}  # cut only where needed
    assert all(responses)
    # The same cut when each data event is the plain tuple of its fields, as the
    # server's streams drain them (drain_raw).
    raw = [as_row(e) if isinstance(e, DataUpdated) else e for e in events]
    assert cut(raw) == responses


@pytest.mark.parametrize("cut", CUTS)
def test_events_without_data_updates_make_no_response(cut: Cut) -> None:
    events: list[Event] = [KeyAdded(1, "K"), ResyncRequired(lost=2)]
    assert cut(events) == []
    assert cut([]) == []
    one = (1, 1, 5, b"v", 0)
    assert cut([*events, one]) == [[one]]


def test_a_batch_of_data_with_each_key_once_is_one_response_without_a_copy() -> None:
    """The fast implementation's: no copy of the drained batch."""
    batch = [(1, 1, 5, b"v", 0), (2, 1, 5, b"w", 0)]
    [response] = cut(batch)
    assert response is batch
