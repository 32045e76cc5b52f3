"""An app stream's ``EventBatch`` messages, in both implementations of
:class:`vehicle_middleware.server.codecs.BatchEncoder`: put together as bytes
(``vehicle_middleware.server.rpc.batches``) and built by protobuf
(``vehicle_middleware.server.rpc.batches_reference``).

Whatever the events (data with any key, seq, time, value and queue; the
lifecycle and health events protobuf encodes), the bytes must be what
protobuf makes of the batch built field by field (``convert.event_batch``):
byte for byte, and parsed back to the same message. Cut to a message limit,
every message fits, none is cut early, and together they are the batch.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.ess import (
    DataUpdated,
    Event,
    KeyAdded,
    KeyFresh,
    KeyRemoved,
    KeyStale,
    ProviderBack,
    ProviderGone,
    ResyncRequired,
    as_row,
)
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.server.codecs import BatchEncoder
from vehicle_middleware.server.rpc.batches import EventBytes
from vehicle_middleware.server.rpc.batches_reference import EventMessages
from vehicle_middleware.server.rpc.convert import event_batch

_U32 = st.integers(1, 2**32 - 1)
_U64 = st.one_of(st.sampled_from([0, 1, 1_764_000_000_123_456_789]), st.integers(0, 2**64 - 1))
_SEQS = st.one_of(st.integers(1, 200), st.integers(100, 20_000), _U32)
_VALUES = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(min_size=1, max_size=20),
    st.binary(min_size=100, max_size=300),  # lengths of two bytes
)

_DATA = st.builds(
    DataUpdated,
    key=st.one_of(st.integers(1, 300), _U32),
    seq=_SEQS,
    time_ns=_U64,
    data=_VALUES,
    queue=st.integers(0, 2),
    # Mostly one write; a filtered subscription's event stands for more.
    writes=st.one_of(st.just(1), st.integers(2, 300), st.integers(1, 2**32 - 1)),
)
_NAMES = st.text(max_size=30)
_KEYS = st.lists(st.integers(1, 1000), max_size=4).map(lambda k: tuple(sorted(k)))
_OTHER = st.one_of(
    st.builds(KeyAdded, key=_U32, name=_NAMES),
    st.builds(KeyRemoved, key=_U32, name=_NAMES),
    st.builds(ResyncRequired, lost=st.integers(0, 2**32 - 1)),
    st.builds(KeyStale, key=_U32, last_write_ns=_U64, period_ns=_U64),
    st.builds(KeyFresh, key=_U32, write_ns=_U64),
    st.builds(ProviderGone, provider=_NAMES, keys=_KEYS),
    st.builds(ProviderBack, provider=_NAMES, keys=_KEYS),
)
# As a drain hands them out: lifecycle and health events first, then mostly data, as
# a stream carries; several events of one publish share a time.
_EVENTS = st.tuples(st.lists(_OTHER, max_size=6), st.lists(_DATA, max_size=34)).map(
    lambda parts: [*parts[0], *parts[1]]
)

ENCODERS = [pytest.param(EventBytes, id="fast"), pytest.param(EventMessages, id="reference")]
"""Both implementations: every test runs over each."""
both = pytest.mark.parametrize("encoder_type", ENCODERS)


def _parsed(message: bytes) -> ess_pb2.EventBatch:
    batch = ess_pb2.EventBatch()
    batch.ParseFromString(message)
    return batch


@both
@given(st.lists(_EVENTS, min_size=1, max_size=3))
def test_each_batch_is_protobufs_own_bytes(
    encoder_type: Callable[[], BatchEncoder], batches: list[list[Event]]
) -> None:
    """And the same bytes when each data event is the plain tuple of its fields,
    as the server's streams drain them (``drain_raw``)."""
    encoder = encoder_type()  # one per stream: its caches carry from batch to batch
    raw_encoder = encoder_type()
    for events in batches:
        [message] = encoder.messages(events, 1 << 30)
        built = event_batch(events)
        assert message == built.SerializeToString()
        assert _parsed(message) == built
        raw = [as_row(e) if isinstance(e, DataUpdated) else e for e in events]
        assert all(type(e) is tuple for e in raw if isinstance(e, tuple))
        assert raw_encoder.messages(raw, 1 << 30) == [message]
        assert event_batch(raw) == built


@both
@given(st.lists(_DATA, min_size=2, max_size=40), st.integers(1, 8))
def test_events_of_one_time_share_it_and_a_new_time_is_written(
    encoder_type: Callable[[], BatchEncoder], events: list[DataUpdated], every: int
) -> None:
    timed = [
        e._replace(time_ns=1_764_000_000_000_000_000 + i // every) for i, e in enumerate(events)
    ]
    [message] = encoder_type().messages(timed, 1 << 30)
    assert [e.data_updated.time_ns for e in _parsed(message).events] == [e.time_ns for e in timed]


@both
@given(_EVENTS, st.integers(1, 3000))
def test_a_batch_over_the_limit_is_cut_between_events(
    encoder_type: Callable[[], BatchEncoder], events: list[Event], limit: int
) -> None:
    messages = encoder_type().messages(events, limit)
    pieces = [event_batch((e,)).SerializeToString() for e in events]
    assert b"".join(messages) == b"".join(pieces)
    assert [e for m in messages for e in _parsed(m).events] == list(event_batch(events).events)
    taken = 0
    for m in messages:
        count = len(_parsed(m).events)
        if count > 1:  # one event alone may exceed the limit; two never share one over it
            assert len(m) <= limit
        if taken + count < len(pieces):  # cut only where the next event did not fit
            assert len(m) + len(pieces[taken + count]) > limit
        taken += count
    assert taken == len(events)


@both
@given(st.lists(st.tuples(st.integers(1, 3), _SEQS), min_size=1, max_size=60))
def test_a_keys_seq_is_encoded_right_whatever_came_before_it(
    encoder_type: Callable[[], BatchEncoder],
    writes: list[tuple[int, int]],
) -> None:
    """The encoder keeps each key's last seq's high part: seqs of few keys that
    rise across multiples of 128, fall back below 128, jump and wrap, one event a
    batch on one stream, are each protobuf's bytes."""
    encoder = encoder_type()
    edges = [(1, 127), (1, 128), (1, 255), (1, 256), (1, 5), (1, 2**32 - 1), (1, 1), (1, 129)]
    for key, seq in edges + writes:
        events = [DataUpdated(key, seq, 1_764_000_000_000_000_000, b"v", 0)]
        assert encoder.messages(events, 1 << 30) == [event_batch(events).SerializeToString()]


@both
def test_an_event_standing_for_several_writes_carries_them_and_one_write_sends_none(
    encoder_type: Callable[[], BatchEncoder],
) -> None:
    """A filtered subscription's event (its row's queue field packs its writes) says
    how many writes it stands for; an event of one write has no ``writes`` field,
    so its bytes are those of an unfiltered event."""
    encoder = encoder_type()
    for queue in (0, 1, 2):
        for writes in (1, 2, 100, 2**32 - 1):
            for data in (b"v", None, b"w" * 200):
                event = DataUpdated(5, 300, 1_764_000_000_000_000_000, data, queue, writes)
                [message] = encoder.messages([as_row(event)], 1 << 30)
                assert message == event_batch([event]).SerializeToString()
                parsed = _parsed(message).events[0].data_updated
                assert parsed.writes == (0 if writes == 1 else writes)
                assert parsed.queue == queue


@both
def test_no_events_is_one_empty_message(encoder_type: Callable[[], BatchEncoder]) -> None:
    assert encoder_type().messages([], 100) == [b""]


@both
def test_every_value_length_around_one_byte_lengths_is_encoded_right(
    encoder_type: Callable[[], BatchEncoder],
) -> None:
    # Where an event's lengths stop fitting one byte each: values of 90 to 140 bytes
    # under the smallest and the largest key, seq and time fields, in each queue.
    encoder = encoder_type()
    for size in range(90, 141):
        for key, seq, time_ns in ((1, 1, 0), (2**32 - 1, 2**32 - 1, 2**64 - 1), (300, 20_000, 1)):
            for queue in (0, 2):
                events = [DataUpdated(key, seq, time_ns, b"v" * size, queue)]
                assert encoder.messages(events, 1 << 30) == [
                    event_batch(events).SerializeToString()
                ], (size, key, seq, time_ns, queue)


@both
def test_the_cut_falls_exactly_at_the_limit(encoder_type: Callable[[], BatchEncoder]) -> None:
    events = [DataUpdated(7, 1000 + i, 1_764_000_000_000_000_000, b"x" * 9, 0) for i in range(10)]
    size = len(event_batch(events[:1]).SerializeToString())  # every event the same size
    for per_message in (1, 3, 4, 10):
        for limit, fits in ((per_message * size, per_message), (per_message * size - 1, None)):
            messages = encoder_type().messages(events, limit)
            expected = fits or max(1, per_message - 1)
            assert [len(m) for m in messages[:-1]] == [expected * size] * (len(messages) - 1)
            assert len(messages) == -(-10 // expected)
