"""Both codecs held to the ``.proto`` contract, with messages generated from its descriptors.

The fast codecs write and read protobuf's bytes by hand (field numbers, wire
types, lengths), so a change to a ``.proto`` they serve must fail a test, not a
car. Hypothesis builds messages from the descriptors of the generated code
(``vehicle_middleware.proto.*_pb2``): every field of a ``DataUpdated``, each float field of a
KUKSA ``Value``, each map's key type. Then:

* the app stream's encoders (:class:`vehicle_middleware.server.codecs.BatchEncoder`) and the
  KUKSA subscription's (:class:`~vehicle_middleware.server.codecs.EntryEncoder`), fast and
  reference, write bytes that the generated code parses to the message the
  values came from;
* the publish readers (:class:`~vehicle_middleware.server.codecs.PublishReader`) read what
  the generated code wrote: the rows the general way makes of the same request.

A field added to ``DataUpdated``, a field renumbered or retyped, a map keyed by
another type: the generated message and what the encoders wrote differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.ess import pack_queue
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2, val_pb2
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.server.codecs import BatchEncoder, EntryEncoderFactory, PublishReaderFactory
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.kuksa.entries import Entries
from vehicle_middleware.server.kuksa.entries_reference import EntryMessages
from vehicle_middleware.server.kuksa.ingest import FloatRows
from vehicle_middleware.server.kuksa.ingest_reference import PublishMessages
from vehicle_middleware.server.rpc.batches import EventBytes
from vehicle_middleware.server.rpc.batches_reference import EventMessages
from vehicle_middleware.vss import Signal

F = FieldDescriptor
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    F.TYPE_UINT32: st.one_of(st.integers(0, 300), st.integers(0, 2**32 - 1)),
    F.TYPE_UINT64: st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1)),
    F.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    F.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    F.TYPE_BOOL: st.booleans(),
    F.TYPE_STRING: st.text(max_size=20),
    F.TYPE_BYTES: st.one_of(st.binary(max_size=20), st.binary(min_size=120, max_size=300)),
    F.TYPE_FLOAT: st.floats(width=32),
    F.TYPE_DOUBLE: st.floats(),
}
"""A value of each scalar field type the messages served here hold."""


def _field_values(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    """Values of a scalar ``field``; a type without a strategy fails the test (a
    field of a new type the codecs do not know)."""
    assert field.type in _SCALARS, f"{field.full_name}: type {field.type} is new here"
    return _SCALARS[field.type]


@st.composite
def _message(draw: st.DrawFn, descriptor: Descriptor, cls: type[Message]) -> Message:
    """A message of ``descriptor``'s scalar fields, each set or left unset (a field
    with presence) or set to a drawn value, zero included."""
    message = cls()
    for field in descriptor.fields:
        assert field.type != F.TYPE_MESSAGE, f"{field.full_name}: a message field is new here"
        if field.has_presence and not draw(st.booleans()):
            continue
        setattr(message, field.name, draw(_field_values(field)))
    return message


@st.composite
def _float_value(draw: st.DrawFn) -> types_pb2.Value:
    """A KUKSA ``Value`` holding one of its float fields (``float``, ``double``),
    chosen from the descriptor's oneof."""
    oneof = types_pb2.Value.DESCRIPTOR.oneofs_by_name["typed_value"]
    field = draw(
        st.sampled_from([f for f in oneof.fields if f.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE)])
    )
    value = types_pb2.Value()
    setattr(value, field.name, draw(_field_values(field)))
    return value


_TIMES = st.one_of(st.sampled_from([0, 1, 1_000_000_000]), st.integers(0, 2**64 - 1))


def _datapoint(value: types_pb2.Value, time_ns: int) -> types_pb2.Datapoint:
    point = types_pb2.Datapoint(value=value)
    point.timestamp.seconds, point.timestamp.nanos = divmod(time_ns, 1_000_000_000)
    return point


def _same(a: Message, b: Message) -> bool:
    """Message equality where NaN equals NaN (a float field's NaN is still a NaN)."""
    return bool(a == b) or str(a).replace("nan", "N") == str(b).replace("nan", "N")


# -- an app stream's batches -----------------------------------------------------------

BATCH_ENCODERS = [pytest.param(EventBytes, id="fast"), pytest.param(EventMessages, id="reference")]


def _row(update: ess_pb2.DataUpdated) -> tuple[int, int, int, bytes | None, int]:
    """The drained data event of a ``DataUpdated``: the fields the encoders write, its
    queue and writes packed in the last (``writes`` 0 on the wire is 1)."""
    data = update.data if update.HasField("data") else None
    packed = pack_queue(update.queue, max(update.writes, 1))
    return (update.key, update.seq, update.time_ns, data, packed)


def _as_served(update: ess_pb2.DataUpdated) -> ess_pb2.DataUpdated:
    """``update`` as the middleware can send it: a queue of the three (0, 1, 2), and
    ``writes`` left out for one write (absent means 1)."""
    served = ess_pb2.DataUpdated()
    served.CopyFrom(update)
    served.queue %= 3
    if served.writes == 1:
        served.ClearField("writes")
    return served


@pytest.mark.parametrize("encoder_type", BATCH_ENCODERS)
@given(
    st.lists(
        _message(ess_pb2.DataUpdated.DESCRIPTOR, ess_pb2.DataUpdated),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 400),
)
def test_a_batch_of_data_updated_parses_to_the_messages_it_came_from(
    encoder_type: Callable[[], BatchEncoder], updates: list[ess_pb2.DataUpdated], limit: int
) -> None:
    """Every field of ``DataUpdated`` as the descriptor has it, in one batch and cut
    to a message limit."""
    encoder = encoder_type()
    updates = [_as_served(u) for u in updates]
    expected = ess_pb2.EventBatch(events=[ess_pb2.Event(data_updated=u) for u in updates])
    rows = [_row(u) for u in updates]
    [whole] = encoder.messages(rows, 1 << 30)
    assert ess_pb2.EventBatch.FromString(whole) == expected
    cut = encoder.messages(rows, limit)
    events = [e for m in cut for e in ess_pb2.EventBatch.FromString(m).events]
    assert events == list(expected.events)


# -- a KUKSA v2 subscription's responses ---------------------------------------------

ENTRY_ENCODERS = [pytest.param(Entries, id="fast"), pytest.param(EntryMessages, id="reference")]
_RESPONSES = [val_pb2.SubscribeResponse, val_pb2.SubscribeByIdResponse]


def _map_keys(response: type[Message]) -> st.SearchStrategy[Any]:
    """Keys of ``response``'s map (``entries``), of the type its descriptor says."""
    key = response.DESCRIPTOR.fields_by_name["entries"].message_type.fields_by_name["key"]
    if key.type == F.TYPE_STRING:
        return st.text(min_size=1, max_size=140)
    assert key.type == F.TYPE_INT32, f"{key.full_name}: type {key.type} is new here"
    return st.integers(1, 2**31 - 1)  # a key id: positive


@pytest.mark.parametrize("encoder", ENTRY_ENCODERS)
@pytest.mark.parametrize("response", _RESPONSES, ids=lambda r: r.__name__)
@given(data=st.data())
def test_a_response_of_float_datapoints_parses_to_the_datapoints_it_came_from(
    encoder: EntryEncoderFactory, response: type[Message], data: st.DataObject
) -> None:
    """Each key's datapoint a float or double with a timestamp, stored as the general
    way stores it for an opaque key and for a signal of the value's datatype."""
    keys = data.draw(st.lists(_map_keys(response), min_size=1, max_size=6, unique=True))
    typed = data.draw(st.booleans())
    expected = response()
    names: dict[int, str] = {}
    signals: dict[str, Signal | None] = {}
    updates = []
    for key_id, key in enumerate(keys, start=1):
        point = _datapoint(data.draw(_float_value()), data.draw(_TIMES))
        kind = point.value.WhichOneof("typed_value")
        name = key if isinstance(key, str) else f"Vehicle.K{key}"
        signal = Signal(name=name, type="sensor", datatype=kind) if typed else None
        names[key if isinstance(key, int) else key_id] = name
        signals[name] = signal
        stored = convert.to_store(name, None, point.value, "typed_value")
        time_ns = point.timestamp.seconds * 1_000_000_000 + point.timestamp.nanos
        updates.append((key if isinstance(key, int) else key_id, 1, time_ns, stored, 0))
        expected.entries[key].CopyFrom(point)  # type: ignore[attr-defined]
    entries = encoder(
        response,
        by_name=response is val_pb2.SubscribeResponse,
        name_of=names.get,
        signal_of=signals.get,
    )
    assert _same(response.FromString(entries.encode(updates)), expected)


# -- a KUKSA v2 provider's publishes ---------------------------------------------------

READERS = [pytest.param(FloatRows, id="fast"), pytest.param(PublishMessages, id="reference")]


@pytest.mark.parametrize("reader_type", READERS)
@given(
    st.integers(0, 2**32 - 1),
    st.dictionaries(st.integers(1, 2**31 - 1), st.tuples(_float_value(), _TIMES), max_size=20),
    st.booleans(),
)
def test_a_publish_the_generated_code_wrote_is_read_as_the_general_way_reads_it(
    reader_type: PublishReaderFactory[Any],
    request_id: int,
    values: dict[int, tuple[types_pb2.Value, int]],
    timed: bool,
) -> None:
    """Floats and doubles to opaque keys, with or without a timestamp: the reader
    answers (but for a NaN, which it leaves to the general way), and its rows are
    the general way's."""
    points = {
        key_id: _datapoint(value, time_ns) if timed else types_pb2.Datapoint(value=value)
        for key_id, (value, time_ns) in values.items()
    }
    raw = val_pb2.OpenProviderStreamRequest(
        publish_values_request=val_pb2.PublishValuesRequest(
            request_id=request_id, data_points=points
        )
    ).SerializeToString()
    names = {key_id: f"Vehicle.K{key_id}" for key_id in points}
    reader = reader_type(names.get, {}.get, lambda: 0)
    published = reader.parse(raw)
    assert published is not None
    rows = reader.rows(published)
    nan = any(
        math.isnan(getattr(p.value, str(p.value.WhichOneof("typed_value"))))
        for p in points.values()
    )
    if nan:
        return
    assert rows is not None
    general = [
        (
            key_id,
            convert.to_store(names[key_id], None, point.value, "typed_value"),
            None,
            convert.source_time(point, "data_point"),
        )
        for key_id, point in points.items()
    ]
    assert sorted(rows) == sorted(general)  # type: ignore[type-var]
