"""A KUKSA provider's publish of floats read by both implementations of
:class:`vehicle_middleware.server.codecs.PublishReader`: without a message per value
(``vehicle_middleware.server.kuksa.ingest``), and by protobuf
(``vehicle_middleware.server.kuksa.ingest_reference``).

Where it answers at all, the reader and the V-Store's value check of each
signal (which judges the range, as the servicer's ``write_many`` does) must
agree with decoding the request as ``PublishValuesRequest`` and writing it
through the general code (``convert.to_store``, ``convert.source_time``): the
same ids, stored bytes and times, and no value the general code would refuse.
Where either does not answer (None, or a refusal), the servicer takes that
way; so the tests also hold the reader to answering for the shape providers
send most: floats and doubles, with or without a timestamp, to keys that take
them.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.values import DOUBLE_TAG, FLOAT32_TAG
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.server.codecs import PublishReaderFactory
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.kuksa.ingest import PUBLISH_BYTES, FloatRows, parse
from vehicle_middleware.server.kuksa.ingest_reference import PublishMessages
from vehicle_middleware.server.kuksa.v2 import provider_request
from vehicle_middleware.server.signals import Signals, value_check
from vehicle_middleware.vss import Signal
from vehicle_middleware.vstore import InvalidValueError, UpdateRow, VStore

_NAMES = {1: "Vehicle.A", 2: "Vehicle.B", 3: "Vehicle.C", 40: "Vehicle.D", 2**31 - 1: "Vehicle.E"}
_IDS = st.sampled_from([*_NAMES, 99])  # 99: no such key
_SECONDS = st.one_of(
    st.sampled_from([0, 1, 1_764_000_000, 18_446_744_073, 18_446_744_074]),
    st.integers(-(2**63), 2**63 - 1),
)
_NANOS = st.one_of(st.integers(0, 999_999_999), st.integers(-(2**31), 2**31 - 1))
_OPAQUE = dict.fromkeys(_NAMES.values())
READERS = [pytest.param(FloatRows, id="fast"), pytest.param(PublishMessages, id="reference")]
"""Both implementations."""
both = pytest.mark.parametrize("reader_type", READERS)
Reader = PublishReaderFactory[Any]


def _NO_CHANGE() -> int:
    """A generation that never changes: every id names the same key, every name the
    same signal."""
    return 0


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


@st.composite
def _signal(draw: st.DrawFn) -> Signal | None:
    datatype = draw(st.sampled_from(("float", "double", "int32", "string", None)))
    if datatype is None:
        return None  # an opaque key
    bound = st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-10, 10))
    return Signal(
        name="n",
        type="sensor",
        datatype=datatype,
        min=draw(bound),
        max=draw(bound),
        allowed=draw(st.sampled_from([(), (1.0, 2.5)])),
    )


_SIGNALS = st.fixed_dictionaries({name: _signal() for name in _NAMES.values()})


def _request(request_id: int, points: dict[int, t2.Datapoint]) -> bytes:
    return v2.OpenProviderStreamRequest(
        publish_values_request=v2.PublishValuesRequest(request_id=request_id, data_points=points)
    ).SerializeToString()


def _judged(rows: list[UpdateRow] | None, signals: dict[str, Signal | None]) -> bool:
    """Whether the servicer writes ``rows`` as they are: the reader answered, and
    the V-Store's value check of each typed key (its range) passes every value."""
    if rows is None:
        return False
    for key_id, data, _, _ in rows:
        assert isinstance(key_id, int)
        assert isinstance(data, bytes)
        signal = signals.get(_NAMES[key_id])
        check = None if signal is None else value_check(signal)
        if check is not None and check(data) is not None:
            return False
    return True


def _rows(
    reader_type: Reader, raw: bytes, signals: dict[str, Signal | None]
) -> list[tuple[object, ...]] | None:
    """The rows of ``raw`` the servicer writes as they are (None: left to the general
    way), checked against what the general way makes of the same bytes wherever
    the reader and the value checks answer."""
    reader = reader_type(_NAMES.get, signals.get, _NO_CHANGE)
    published = reader.parse(raw)
    if published is None:
        return None
    rows = reader.rows(published)
    if rows is None or not _judged(rows, signals):
        return None
    message = v2.OpenProviderStreamRequest.FromString(raw)  # it decodes: the rows say so
    publish = message.publish_values_request
    assert message.WhichOneof("action") == "publish_values_request"
    assert published.request_id == publish.request_id
    assert sorted(row[0] for row in rows) == sorted(publish.data_points)
    for key_id, data, version, time_ns in rows:
        assert isinstance(key_id, int)
        name, point = _NAMES[key_id], publish.data_points[key_id]
        # The general way takes it (raises nothing) and stores the same bytes.
        assert data == convert.to_store(name, signals.get(name), point.value, "typed_value")
        assert version is None
        assert time_ns == convert.source_time(point, "data_point")
    return [tuple(row) for row in rows]


@both
@given(st.integers(0, 2**32 - 1), st.dictionaries(_IDS, _point(simple=True), max_size=90))
def test_floats_with_or_without_a_timestamp_to_opaque_keys_take_this_way(
    reader_type: Reader, request_id: int, points: dict[int, t2.Datapoint]
) -> None:
    points.pop(99, None)
    raw = _request(request_id, points)
    rows = _rows(reader_type, raw, _OPAQUE)
    if any(
        math.isnan(getattr(p.value, p.value.WhichOneof("typed_value"))) for p in points.values()
    ):
        return  # a NaN is stored as written (the general way's encoder judges it)
    assert rows is not None
    assert len(rows) == len(points)
    reader = reader_type(_NAMES.get, _OPAQUE.get, _NO_CHANGE)
    assert isinstance(provider_request(raw, read=reader.parse), type(reader.parse(raw)))


@both
@given(_SIGNALS, st.dictionaries(_IDS, _point(simple=True), max_size=8))
def test_floats_to_signals_with_rules_are_written_as_the_general_way_writes_them(
    reader_type: Reader, signals: dict[str, Signal | None], points: dict[int, t2.Datapoint]
) -> None:
    _rows(reader_type, _request(1, points), signals)


@both
@given(_SIGNALS, st.integers(0, 2**32 - 1), st.dictionaries(st.integers(-5, 2**31 - 1), _point()))
def test_other_values_ids_and_timestamps_are_written_as_the_general_way_writes_them_or_left_to_it(
    reader_type: Reader,
    signals: dict[str, Signal | None],
    request_id: int,
    points: dict[int, t2.Datapoint],
) -> None:
    _rows(reader_type, _request(request_id, points), signals)


@both
@given(st.dictionaries(_IDS, _point(simple=True), min_size=1, max_size=4), st.data())
def test_cut_or_changed_bytes_are_read_as_the_general_way_reads_them_or_left_to_it(
    reader_type: Reader, points: dict[int, t2.Datapoint], data: st.DataObject
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
    _rows(reader_type, bytes(raw), _OPAQUE)


@both
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
def test_every_other_action_is_protobufs_message(
    reader_type: Reader, message: v2.OpenProviderStreamRequest
) -> None:
    raw = message.SerializeToString()
    reader = reader_type(_NAMES.get, _OPAQUE.get, _NO_CHANGE)
    assert reader.parse(raw) is None
    assert provider_request(raw, read=reader.parse) == message


@both
def test_a_publish_beside_another_action_is_protobufs_message(reader_type: Reader) -> None:
    """A oneof's last field on the wire is the request's action: here the publish
    comes first, so the request is a ProvideSignalRequest."""
    publish = v2.OpenProviderStreamRequest(
        publish_values_request=v2.PublishValuesRequest(
            data_points={1: t2.Datapoint(value=t2.Value(float=1.0))}
        )
    )
    provide = v2.OpenProviderStreamRequest(provide_signal_request=v2.ProvideSignalRequest())
    raw = publish.SerializeToString() + provide.SerializeToString()
    reader = reader_type(_NAMES.get, _OPAQUE.get, _NO_CHANGE)
    assert reader.parse(raw) is None
    assert provider_request(raw, read=reader.parse) == provide


def test_an_encoding_protobuf_would_not_write_is_left_to_it() -> None:
    """The fast reader's (the reference reads what protobuf reads). An id twice (the
    last wins), a Datapoint's field twice in one entry (the Datapoints merge): what
    protobuf makes of such bytes is its own to say."""
    one = v2.PublishValuesRequest(data_points={1: t2.Datapoint(value=t2.Value(float=1.0))})
    two = v2.PublishValuesRequest(data_points={1: t2.Datapoint(value=t2.Value(float=2.0))})
    publish = one.SerializeToString() + two.SerializeToString()  # id 1 twice
    assert parse(b"\x12" + bytes([len(publish)]) + publish) is None
    stamp = t2.Datapoint()
    stamp.timestamp.seconds = 1_700_000_000
    value = t2.Datapoint(value=t2.Value(float=1.0))
    entry = b"\x08\x01" + b"".join(
        b"\x12" + bytes([len(p)]) + p
        for p in (stamp.SerializeToString(), value.SerializeToString())
    )
    publish = b"\x12" + bytes([len(entry)]) + entry
    raw = b"\x12" + bytes([len(publish)]) + publish
    merged = v2.OpenProviderStreamRequest.FromString(raw).publish_values_request.data_points[1]
    assert merged.timestamp.seconds == 1_700_000_000  # protobuf merged the two
    assert merged.value.float == 1.0
    assert parse(raw) is None


@both
def test_rows_of_the_common_case_and_each_refusal_left_to_the_general_way(
    reader_type: Reader,
) -> None:
    speed = Signal(name="Vehicle.A", type="sensor", datatype="float", min=0, max=300)
    signals: dict[str, Signal | None] = {"Vehicle.A": speed}

    def rows(points: dict[int, t2.Datapoint]) -> list[tuple[object, ...]] | None:
        found = _rows(reader_type, _request(1, points), signals)
        return None if found is None else sorted(found)  # type: ignore[type-var]

    def point(value: t2.Value, seconds: int = 0, nanos: int = 0) -> t2.Datapoint:
        p = t2.Datapoint(value=value)
        if seconds or nanos:
            p.timestamp.seconds, p.timestamp.nanos = seconds, nanos
        return p

    assert rows(
        {
            1: point(t2.Value(float=50.0), 1_700_000_000, 5),
            2: point(t2.Value(double=-1e300), 1_700_000_000, 5),
            3: point(t2.Value(float=1.5)),
        }
    ) == [
        (1, bytes((FLOAT32_TAG,)) + struct.pack("<f", 50.0), None, 1_700_000_000_000_000_005),
        (2, bytes((DOUBLE_TAG,)) + struct.pack("<d", -1e300), None, 1_700_000_000_000_000_005),
        (3, bytes((FLOAT32_TAG,)) + struct.pack("<f", 1.5), None, None),
    ]
    assert rows({}) == []
    assert rows({1: point(t2.Value(float=301.0))}) is None  # beyond max: the general way says so
    assert rows({1: point(t2.Value(double=50.0))}) is None  # a double for a float signal
    assert rows({99: point(t2.Value(float=1.0))}) is None  # no such key
    assert rows({0: point(t2.Value(float=1.0))}) is None
    assert rows({2: point(t2.Value(float=math.nan))}) is None
    assert rows({2: point(t2.Value(int32=3))}) is None
    assert rows({2: point(t2.Value(float=1.0), -1)}) is None  # before 1970
    assert rows({2: point(t2.Value(float=1.0), 1, 1_000_000_000)}) is None  # nanos too big
    assert rows({2: t2.Datapoint()}) is None  # no value


@both
def test_each_value_keeps_its_own_time_where_neighbours_share_or_differ_by_a_byte(
    reader_type: Reader,
) -> None:
    """The reader reads a timestamp once for values that share their bytes before the
    number: a neighbour whose timestamp differs in one byte only (same length), or
    whose number is of the other width, is read anew."""

    def point(value: t2.Value, nanos: int) -> t2.Datapoint:
        p = t2.Datapoint(value=value)
        p.timestamp.seconds, p.timestamp.nanos = 1_700_000_000, nanos
        return p

    points = {
        1: point(t2.Value(float=1.0), 5),
        2: point(t2.Value(float=2.0), 5),
        3: point(t2.Value(float=3.0), 6),  # one byte apart from 5
        40: point(t2.Value(double=4.0), 6),
        2**31 - 1: point(t2.Value(float=5.0), 5),
    }
    rows = _rows(reader_type, _request(1, points), _OPAQUE)
    assert rows is not None
    assert {row[0]: row[3] for row in rows} == {
        1: 1_700_000_000_000_000_005,
        2: 1_700_000_000_000_000_005,
        3: 1_700_000_000_000_000_006,
        40: 1_700_000_000_000_000_006,
        2**31 - 1: 1_700_000_000_000_000_005,
    }
    assert {row[0]: row[1] for row in rows}[40] == bytes((DOUBLE_TAG,)) + struct.pack("<d", 4.0)


@both
def test_a_signal_that_changes_is_judged_anew(reader_type: Reader) -> None:
    """Its key removed and added again under another signal (the generation says
    so): the rule of the signal now, not the last."""
    signals: dict[str, Signal | None] = {
        "Vehicle.A": Signal(name="Vehicle.A", type="sensor", datatype="double")
    }
    generation = 0
    reader = reader_type(_NAMES.get, signals.get, lambda: generation)

    def taken(value: t2.Value) -> bool:
        published = reader.parse(_request(1, {1: t2.Datapoint(value=value)}))
        assert published is not None
        return _judged(reader.rows(published), signals)

    assert not taken(t2.Value(float=50.0))
    assert taken(t2.Value(double=50.0))
    signals["Vehicle.A"] = Signal(name="Vehicle.A", type="sensor", datatype="float", max=10)
    generation += 1
    assert not taken(t2.Value(double=5.0))
    assert not taken(t2.Value(float=50.0))
    assert taken(t2.Value(float=5.0))
    signals["Vehicle.A"] = None
    generation += 1
    assert taken(t2.Value(double=5.0))


@both
def test_an_id_a_removed_key_left_is_judged_by_the_key_that_has_it_now(reader_type: Reader) -> None:
    """Through the V-Store, as the server wires it (each signal's value check by
    name, the rows written with ``write_many``): a key removed, its id handed to a
    new key of another signal; neither the reader nor the check may judge by the
    old key's rule."""
    store = VStore()
    signals: dict[str, Signal | None] = {
        "Vehicle.Wide": Signal(name="Vehicle.Wide", type="sensor", datatype="double"),
        "Vehicle.Narrow": Signal(name="Vehicle.Narrow", type="sensor", datatype="float", max=10),
    }
    Signals(s for s in signals.values() if s is not None).install(store)
    store.remove_key("Vehicle.Narrow")
    reader = reader_type(store.name_of, signals.get, lambda: store.removals)
    key_id = store.id_of("Vehicle.Wide")
    assert key_id is not None

    def taken(value: t2.Value) -> bool:
        published = reader.parse(_request(1, {key_id: t2.Datapoint(value=value)}))
        assert published is not None
        rows = reader.rows(published)
        if rows is None:
            return False
        try:
            store.write_many(rows)
        except InvalidValueError:
            return False
        return True

    assert taken(t2.Value(double=50.0))
    assert not taken(t2.Value(float=5.0))  # a float for a double signal: the general way's
    store.remove_key("Vehicle.Wide")
    assert store.add_key("Vehicle.Narrow") == key_id  # the id is handed on
    assert not taken(t2.Value(double=5.0))  # Narrow is a float signal: not Wide's rule
    assert not taken(t2.Value(float=50.0))  # Narrow's max is 10: the general way refuses it
    assert taken(t2.Value(float=5.0))


# Requests crafted to look canonical to the second schema while protobuf reads them
# otherwise (found by review): the reader must leave each to protobuf.
_MERGED = bytes.fromhex(
    "1234"
    "1216080112080a060880e2cfaa061208"  # id 1: a Datapoint with a timestamp, then
    "12068d010000803f"  # ... a second Datapoint field with the value: protobuf merges them
    "120c08ffffffff0f120212001800"  # id -1 in 5 bytes (10 re-encoded), an unknown field
    "120c08ffffffff0f120212001800"  # the same: together, as long as the dropped field
)
_BAD_UTF8 = bytes.fromhex(
    "121b"
    "120c0801120812068d010000803f"  # id 1: a float
    "120b0807120512035a01ff1800"  # id 7: a string of invalid UTF-8, an unknown field
)


def test_an_entry_with_an_unknown_field_hides_nothing() -> None:
    """The fast reader's second schema (the reference reads what protobuf reads)."""
    merged = v2.OpenProviderStreamRequest.FromString(_MERGED).publish_values_request
    assert merged.data_points[1].timestamp.seconds == 1_700_000_000  # protobuf merged them
    assert parse(_MERGED) is None
    with pytest.raises(DecodeError):
        v2.OpenProviderStreamRequest.FromString(_BAD_UTF8)
    assert parse(_BAD_UTF8) is None


def test_a_timestamp_field_of_128_bytes_or_more_is_left_to_protobuf() -> None:
    """The fast reader's (bytes protobuf refuses the reference never reads)."""
    stamp = b"\x08\x01" + b"\x1a\x7d" + bytes(125)  # 129 bytes: seconds 1, an unknown field
    point = b"\x0a\x81" + stamp + b"\x12\x06\x8d\x01" + struct.pack("<f", 1.0)
    raw = PUBLISH_BYTES(publish_values_request={"data_points": {1: point}}).SerializeToString()
    with pytest.raises(DecodeError):
        v2.OpenProviderStreamRequest.FromString(raw)  # its length is 0x81 0x..: past the end
    published = parse(raw)
    assert published is not None
    assert FloatRows(_NAMES.get, _OPAQUE.get, _NO_CHANGE).rows(published) is None


@both
@pytest.mark.parametrize("bound", [2**53 + 1, 10**400])
def test_an_integer_bound_no_float_holds_is_left_to_the_general_way(
    reader_type: Reader, bound: int
) -> None:
    """Compared as floats (as compiled code would), 2**53 + 1 is 2**53: 2**53 would
    pass a min it is below; 10**400 is no float at all."""
    signals: dict[str, Signal | None] = {
        "Vehicle.A": Signal(name="Vehicle.A", type="sensor", datatype="double", min=bound)
    }
    reader = reader_type(_NAMES.get, signals.get, _NO_CHANGE)
    published = reader.parse(_request(1, {1: t2.Datapoint(value=t2.Value(double=2.0**53))}))
    assert published is not None
    assert reader.rows(published) is None


@both
@given(
    st.fixed_dictionaries(
        {name: st.sampled_from(["float", "double", None]) for name in _NAMES.values()}
    ),
    st.dictionaries(st.sampled_from(list(_NAMES)), st.floats(width=32, allow_nan=False)),
    st.booleans(),
)
def test_floats_to_signals_without_a_rule_take_this_way(
    reader_type: Reader, datatypes: dict[str, str | None], values: dict[int, float], timed: bool
) -> None:
    """A signal without min, max or allowed takes any number of its datatype (within
    single precision for a float: every float32 but the infinities)."""
    signals: dict[str, Signal | None] = {
        name: None if d is None else Signal(name=name, type="sensor", datatype=d)
        for name, d in datatypes.items()
    }
    points = {}
    for key_id, number in values.items():
        if math.isinf(number) and datatypes[_NAMES[key_id]] == "float":
            number = 0.0
        value = (
            t2.Value(double=number)
            if datatypes[_NAMES[key_id]] == "double"
            else t2.Value(float=number)
        )
        points[key_id] = t2.Datapoint(value=value)
        if timed:
            points[key_id].timestamp.seconds = 1_700_000_000
    rows = _rows(reader_type, _request(1, points), signals)
    assert rows is not None
    assert len(rows) == len(points)
