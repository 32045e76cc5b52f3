"""A KUKSA provider's publish of floats read from its bytes (``vmw.server.kuksa.ingest``).

The reader must agree with protobuf's decoding and the servicer's rules wherever
it answers at all: same ids, same stored bytes, same times, and no value the
general way (``convert.to_store``, ``convert.source_time``) would refuse. Where
it does not answer (None), the servicer decodes the request with protobuf; so
the tests also hold it to answering for the shape providers send most: floats
and doubles, with or without a timestamp.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vmw.contract.values import DOUBLE_TAG, FLOAT32_TAG
from vmw.proto.kuksa.val.v2 import types_pb2 as t2
from vmw.proto.kuksa.val.v2 import val_pb2 as v2
from vmw.server.kuksa import convert
from vmw.server.kuksa.ingest import FloatRows, Published, parse
from vmw.server.kuksa.v2 import provider_request
from vmw.vss import Signal

_IDS = st.integers(0, 2**31 - 1)
_SECONDS = st.one_of(
    st.sampled_from([0, 1, 1_764_000_000, 18_446_744_073, 18_446_744_074]),
    st.integers(-(2**63), 2**63 - 1),
)
_NANOS = st.one_of(st.integers(0, 999_999_999), st.integers(-(2**31), 2**31 - 1))


@st.composite
def _value(draw: st.DrawFn, *, floats_only: bool = False) -> t2.Value:
    kind = draw(st.sampled_from(["float", "double"] * 3 + ([] if floats_only else ["other"])))
    if kind == "float":
        return t2.Value(float=draw(st.floats(width=32)))
    if kind == "double":
        return t2.Value(double=draw(st.floats()))
    return draw(
        st.sampled_from(
            [
                t2.Value(),
                t2.Value(int32=-3),
                t2.Value(uint64=7),
                t2.Value(string="x"),
                t2.Value(float_array=t2.FloatArray(values=[1.0])),
            ]
        )
    )


@st.composite
def _point(draw: st.DrawFn, *, simple: bool = False) -> t2.Datapoint:
    point = t2.Datapoint()
    if simple or draw(st.integers(0, 9)):
        point.value.CopyFrom(draw(_value(floats_only=simple)))
    if draw(st.booleans()):
        if simple:
            time_ns = draw(st.integers(0, 2**64 - 1))
            point.timestamp.seconds, point.timestamp.nanos = divmod(time_ns, 1_000_000_000)
        else:
            point.timestamp.seconds = draw(_SECONDS)
            point.timestamp.nanos = draw(_NANOS)
    return point


def _request(request_id: int, points: dict[int, t2.Datapoint]) -> bytes:
    return v2.OpenProviderStreamRequest(
        publish_values_request=v2.PublishValuesRequest(request_id=request_id, data_points=points)
    ).SerializeToString()


def _same_number(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _agrees(raw: bytes, published: Published) -> None:
    """``published`` says what protobuf and the servicer's conversions say of ``raw``."""
    message = v2.OpenProviderStreamRequest.FromString(raw)
    publish = message.publish_values_request
    assert message.WhichOneof("action") == "publish_values_request"
    assert published.request_id == publish.request_id
    assert set(published.points) == set(publish.data_points)
    for key_id, (data, datatype, number, time_ns) in published.points.items():
        point = publish.data_points[key_id]
        wire = point.value.WhichOneof("typed_value")
        assert wire == datatype  # the Value's field is named as the datatype it holds
        width = struct.Struct("<f" if wire == "float" else "<d")
        tag = FLOAT32_TAG if wire == "float" else DOUBLE_TAG
        assert data == bytes((tag,)) + width.pack(getattr(point.value, wire))
        assert _same_number(number, getattr(point.value, wire))
        assert time_ns == (convert.source_time(point, "data_point") or 0)


@given(st.integers(0, 2**32 - 1), st.dictionaries(_IDS, _point(simple=True), max_size=90))
def test_floats_with_or_without_a_timestamp_are_read_as_protobuf_reads_them(
    request_id: int, points: dict[int, t2.Datapoint]
) -> None:
    raw = _request(request_id, points)
    published = parse(raw)
    assert published is not None
    _agrees(raw, published)
    assert provider_request(raw) is not None


@given(st.integers(0, 2**32 - 1), st.dictionaries(st.integers(-5, 2**31 - 1), _point(), max_size=8))
def test_whatever_the_reader_answers_protobuf_agrees_with(
    request_id: int, points: dict[int, t2.Datapoint]
) -> None:
    """Other values, negative ids, bad timestamps: read as protobuf reads them, or left to it."""
    raw = _request(request_id, points)
    published = parse(raw)
    if published is not None:
        _agrees(raw, published)
    else:
        decoded = provider_request(raw)
        assert isinstance(decoded, v2.OpenProviderStreamRequest)
        assert (
            decoded.SerializeToString()
            == v2.OpenProviderStreamRequest.FromString(raw).SerializeToString()
        )


@given(
    st.dictionaries(_IDS, _point(simple=True), min_size=1, max_size=4),
    st.data(),
)
def test_cut_or_changed_bytes_are_read_as_protobuf_reads_them_or_left_to_it(
    points: dict[int, t2.Datapoint], data: st.DataObject
) -> None:
    """A byte changed, bytes cut off or added: never read differently from protobuf,
    never read where protobuf fails."""
    raw = bytearray(_request(7, points))
    how = data.draw(st.sampled_from(["change", "cut", "add"]))
    at = data.draw(st.integers(0, len(raw) - 1))
    if how == "change":
        raw[at] = data.draw(st.integers(0, 255))
    elif how == "cut":
        del raw[at:]
    else:
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    published = parse(bytes(raw))
    if published is not None:
        _agrees(bytes(raw), published)


@pytest.mark.parametrize(
    "message",
    [
        v2.OpenProviderStreamRequest(provide_signal_request=v2.ProvideSignalRequest()),
        v2.OpenProviderStreamRequest(
            provide_actuation_request=v2.ProvideActuationRequest(
                actuator_identifiers=[t2.SignalID(id=1)]
            )
        ),
        v2.OpenProviderStreamRequest(
            batch_actuate_stream_response=v2.BatchActuateStreamResponse(signal_id=t2.SignalID(id=3))
        ),
        v2.OpenProviderStreamRequest(),
    ],
)
def test_every_other_action_is_protobufs_message(message: v2.OpenProviderStreamRequest) -> None:
    raw = message.SerializeToString()
    assert parse(raw) is None
    assert provider_request(raw) == message


def test_the_last_value_of_an_id_wins_as_in_protobufs_map() -> None:
    one = v2.PublishValuesRequest(data_points={5: t2.Datapoint(value=t2.Value(float=1.0))})
    two = v2.PublishValuesRequest(data_points={5: t2.Datapoint(value=t2.Value(float=2.0))})
    # Two messages' bytes one after the other merge into one: the map holds id 5 twice.
    publish = one.SerializeToString() + two.SerializeToString()
    raw = b"\x12" + bytes([len(publish)]) + publish
    published = parse(raw)
    assert published is not None
    assert list(published.points) == [5]
    assert published.points[5][2] == 2.0
    _agrees(raw, published)


# -- the rows: never what the general way refuses, the same bytes where it takes them


_DATATYPES = ("float", "double", "int32", "string", None)
_NAMES = {1: "Vehicle.A", 2: "Vehicle.B", 3: "Vehicle.C", 40: "Vehicle.D"}


@st.composite
def _signal(draw: st.DrawFn) -> Signal | None:
    datatype = draw(st.sampled_from(_DATATYPES))
    if datatype is None:
        return None
    bound = st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-10, 10))
    allowed = draw(st.sampled_from([(), (1.0, 2.5)]))
    return Signal(
        name="n",
        type="sensor",
        datatype=datatype,
        min=draw(bound),
        max=draw(bound),
        allowed=allowed,
    )


@given(
    st.fixed_dictionaries({name: _signal() for name in _NAMES.values()}),
    st.dictionaries(st.sampled_from([0, 1, 2, 3, 40, 99]), _point(simple=True), max_size=6),
)
def test_rows_are_what_the_general_way_writes_or_none(
    signals: dict[str, Signal | None], points: dict[int, t2.Datapoint]
) -> None:
    raw = _request(1, points)
    published = parse(raw)
    assert published is not None
    rows = FloatRows(_NAMES.get, signals.get).rows(published)
    if rows is None:
        return
    assert [row[0] for row in rows] == list(published.points)
    for key_id, data, version, time_ns in rows:
        assert isinstance(key_id, int)
        name = _NAMES[key_id]
        point = points[key_id]
        # The general way takes it (raises nothing) and stores the same bytes.
        assert data == convert.to_store(name, signals[name], point.value, "typed_value")
        assert version is None
        assert time_ns == convert.source_time(point, "data_point")


def test_rows_of_the_common_case_and_each_refusal_left_to_the_general_way() -> None:
    speed = Signal(name="Vehicle.Speed", type="sensor", datatype="float", min=0, max=300)
    names = {1: "Vehicle.Speed", 2: "Vehicle.Opaque"}.get
    signals = {"Vehicle.Speed": speed}.get
    rows = FloatRows(names, signals)

    def of(points: dict[int, t2.Value]) -> list[tuple[object, ...]] | None:
        published = parse(_request(1, {k: t2.Datapoint(value=v) for k, v in points.items()}))
        assert published is not None
        found = rows.rows(published)
        return None if found is None else sorted(tuple(row) for row in found)

    assert of({1: t2.Value(float=50.0), 2: t2.Value(double=-1e300)}) == [
        (1, bytes((FLOAT32_TAG,)) + struct.pack("<f", 50.0), None, None),
        (2, bytes((DOUBLE_TAG,)) + struct.pack("<d", -1e300), None, None),
    ]
    assert of({}) == []
    assert of({1: t2.Value(float=301.0)}) is None  # beyond max: said by the general way
    assert of({1: t2.Value(double=50.0)}) is None  # a double for a float signal
    assert of({3: t2.Value(float=1.0)}) is None  # no such key
    assert of({0: t2.Value(float=1.0)}) is None
    assert of({2: t2.Value(float=math.nan)}) is None
    # A signal that changes (another catalog, a key added again) is judged anew.
    signals_now = {"Vehicle.Speed": Signal(name="Vehicle.Speed", type="sensor", datatype="double")}
    rows = FloatRows(names, lambda name: signals_now.get(name))
    assert of({1: t2.Value(float=50.0)}) is None
    assert of({1: t2.Value(double=50.0)}) is not None
    signals_now["Vehicle.Speed"] = speed
    assert of({1: t2.Value(double=50.0)}) is None
