"""A KUKSA subscription's drained events cut into responses (``vmw.server.kuksa.cut``)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st
from vmw.ess import DataUpdated, Event, KeyAdded, ResyncRequired
from vmw.server.kuksa.cut import Update, cut

_DATA = st.builds(
    DataUpdated,
    key=st.integers(1, 4),
    seq=st.integers(1, 9),
    time_ns=st.integers(0, 9),
    data=st.none() | st.sampled_from([b"a", b"b", b""]),
    queue=st.just(0),
)
_EVENTS = st.lists(
    st.one_of(_DATA, _DATA, _DATA, st.builds(KeyAdded, key=st.integers(1, 4), name=st.just("K"))),
    max_size=20,
)


@given(st.lists(_EVENTS, min_size=1, max_size=3), st.dictionaries(st.integers(1, 4), st.binary()))
def test_a_batch_is_cut_where_a_key_repeats_and_each_update_carries_a_value(
    drains: list[list[Event]], first: dict[int, bytes]
) -> None:
    """In order, each key at most once a response, as few responses as that
    allows; an update without a value carries the last one sent, across drains."""
    last: dict[int, bytes | None] = dict(first)
    known: dict[int, bytes | None] = dict(first)
    for events in drains:
        before_drain = dict(last)
        responses = cut(events, last)
        data = [e for e in events if type(e) is DataUpdated]
        assert [u for r in responses for u in r] == [
            (e.key, _carried(known, e), e.time_ns) for e in data
        ]
        for response in responses:
            assert len({key for key, _, _ in response}) == len(response)
        for before, after in itertools.pairwise(responses):
            assert after[0][0] in {key for key, _, _ in before}  # cut only where needed
        assert all(responses)
        assert last == known
        # The same cut when each data event is the plain tuple of its fields, as
        # the server's streams drain them (drain_raw).
        raw = [tuple(e) if isinstance(e, DataUpdated) else e for e in events]
        assert cut(raw, dict(before_drain)) == responses


def _carried(known: dict[int, bytes | None], e: DataUpdated) -> bytes | None:
    if e.data is not None:
        known[e.key] = e.data
    known.setdefault(e.key, None)
    return known[e.key]


def test_events_without_data_updates_make_no_response() -> None:
    events: list[Event] = [KeyAdded(1, "K"), ResyncRequired(lost=2)]
    assert cut(events, {}) == []
    one: list[Update] = [(1, b"v", 5)]
    assert cut([*events, DataUpdated(1, 1, 5, b"v", 0)], {}) == [one]
