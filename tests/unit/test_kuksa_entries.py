"""KUKSA v2 subscription responses, property-based, in both implementations of
:class:`vehicle_middleware.server.codecs.EntryEncoder`: built as bytes
(``vehicle_middleware.server.kuksa.entries``)
and by protobuf (``vehicle_middleware.server.kuksa.entries_reference``).

Whatever the path an entry takes (spliced from a stored float, or encoded by
protobuf), protobuf must parse the response to the message the servicer
built field by field before (``convert.set_wire`` and ``set_timestamp`` in
each entry): same keys, same values in the same wire fields, same timestamps.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.values import (
    DOUBLE_TAG,
    FLOAT32_TAG,
    Failure,
    FailureCode,
    encode,
)
from vehicle_middleware.ess import pack_queue
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2
from vehicle_middleware.server.codecs import EntryEncoderFactory
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.kuksa.entries import Entries
from vehicle_middleware.server.kuksa.entries_reference import EntryMessages
from vehicle_middleware.server.kuksa.response_cuts import Update
from vehicle_middleware.vss import Signal

_DATATYPES = ("float", "double", "int32", "uint64", "string", "boolean", "float[]", None)
_NAMES = ["Vehicle.Speed", "V" * 200, "Vehicle.Cabin.Température", "X"]
ENCODERS = [pytest.param(Entries, id="fast"), pytest.param(EntryMessages, id="reference")]
"""Both implementations: every test runs over each."""
both = pytest.mark.parametrize("encoder", ENCODERS)


def _signal(datatype: str | None) -> Signal | None:
    if datatype is None:
        return None  # an opaque key: read in the kind it was written in
    return Signal(name="n", type="sensor", datatype=datatype)


@st.composite
def _stored(draw: st.DrawFn) -> bytes | None:
    """Bytes a key may hold: floats of both widths most, other kinds, a failure,
    none, junk."""
    kind = draw(
        st.sampled_from(
            ["float32", "float", "float32", "float", "int", "string", "failure", "other"]
        )
    )
    if kind == "failure":
        return encode(Failure(draw(st.sampled_from(FailureCode)), draw(st.text(max_size=5))))
    if kind == "float32":
        return encode(draw(st.floats(width=32)), kind="float32")
    if kind == "float":
        return encode(draw(st.floats()), kind="float")
    if kind == "int":
        return encode(draw(st.integers(-(2**63), 2**63 - 1)), kind="int")
    if kind == "string":
        return encode(draw(st.text(max_size=10)), kind="string")
    return draw(st.sampled_from([None, b"", b"\xff\xff", bytes([FLOAT32_TAG]) + b"\x00\x00"]))


_TIMES = st.one_of(
    st.sampled_from([0, 1, 999_999_999, 1_000_000_000, 1_764_000_000_123_456_789]),
    st.integers(0, 2**64 - 1),
)


def _expected(
    response: type[val_pb2.SubscribeResponse] | type[val_pb2.SubscribeByIdResponse],
    batch: list[tuple[int, bytes | None, int]],
    keys: dict[int, tuple[str | int, Signal | None]],
) -> val_pb2.SubscribeResponse | val_pb2.SubscribeByIdResponse:
    """The response as the servicer built it field by field."""
    message = response()
    for key_id, data, time_ns in batch:
        key, signal = keys[key_id]
        point = message.entries[key]  # type: ignore[index]
        if convert.set_wire(point.value, data, signal):
            convert.set_timestamp(point.timestamp, time_ns)
    return message


def _updates(batch: list[tuple[int, bytes | None, int]], packed: int = 0) -> list[Update]:
    """``(key id, value, time)`` as the data events the encoder is handed (any seq;
    ``packed``: the rows' queue field, which packs a filtered event's writes)."""
    return [
        (key_id, n + 1, time_ns, data, packed) for n, (key_id, data, time_ns) in enumerate(batch)
    ]


def _same(a: object, b: object) -> bool:
    """Message equality where NaN equals NaN (a float field's NaN is still a NaN)."""
    return bool(a == b) or str(a).replace("nan", "N") == str(b).replace("nan", "N")


@both
@given(
    st.lists(st.tuples(st.sampled_from(_DATATYPES), _stored(), _TIMES), min_size=0, max_size=6),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0, 2, pack_queue(0, 2), pack_queue(1, 1000)]),
)
def test_a_response_parses_to_the_message_built_field_by_field(
    encoder: EntryEncoderFactory,
    rows: list[tuple[str | None, bytes | None, int]],
    by_name: bool,
    shared_time: bool,
    packed: int,
) -> None:
    """Whatever the queue and the writes an event stands for (a filtered
    subscription's): KUKSA has no field for them."""
    response = val_pb2.SubscribeResponse if by_name else val_pb2.SubscribeByIdResponse
    names = {i + 1: _NAMES[i % len(_NAMES)] + str(i) for i in range(len(rows))}
    signals = {names[i + 1]: _signal(d) for i, (d, _, _) in enumerate(rows)}
    keys: dict[int, tuple[str | int, Signal | None]] = {
        key_id: (name if by_name else key_id, signals[name]) for key_id, name in names.items()
    }
    time0 = rows[0][2] if rows else 0
    batch = [(i + 1, data, time0 if shared_time else t) for i, (_, data, t) in enumerate(rows)]
    entries = encoder(response, by_name=by_name, name_of=names.get, signal_of=signals.get)

    got = response.FromString(entries.encode(_updates(batch, packed)))

    assert _same(got, _expected(response, batch, keys))
    assert sorted(got.entries) == sorted(keys[k][0] for k, _, _ in batch)


@both
@given(
    st.lists(
        st.lists(st.tuples(st.integers(1, 4), _stored(), _TIMES), max_size=6).map(
            lambda batch: list({key: (key, data, t) for key, data, t in batch}.values())
        ),
        min_size=2,
        max_size=5,
    )
)
def test_a_streams_responses_stay_right_as_its_keys_come_again_with_other_times(
    encoder: EntryEncoderFactory,
    batches: list[list[tuple[int, bytes | None, int]]],
) -> None:
    """One stream's encoder across responses (what it keeps of a key carries from
    one to the next): a key written again, with a timestamp of another length or
    a value of another width, still parses to the message built field by field.
    A second stream (by id) encodes each batch in turn: the last time's field,
    which the streams share, is never another's."""
    names = {1: "Vehicle.F", 2: "Vehicle.D", 3: "Vehicle.Opaque", 4: "V" * 120}
    signals = {
        "Vehicle.F": _signal("float"),
        "Vehicle.D": _signal("double"),
        "Vehicle.Opaque": None,
        "V" * 120: _signal("float"),
    }
    keys: dict[int, tuple[str | int, Signal | None]] = {
        key_id: (name, signals[name]) for key_id, name in names.items()
    }
    by_id: dict[int, tuple[str | int, Signal | None]] = {
        key_id: (key_id, signals[name]) for key_id, name in names.items()
    }
    entries = encoder(
        val_pb2.SubscribeResponse, by_name=True, name_of=names.get, signal_of=signals.get
    )
    other = encoder(
        val_pb2.SubscribeByIdResponse, by_name=False, name_of=names.get, signal_of=signals.get
    )
    for n, batch in enumerate(batches):
        got = val_pb2.SubscribeResponse.FromString(entries.encode(_updates(batch)))
        assert _same(got, _expected(val_pb2.SubscribeResponse, batch, keys))
        shifted = [(key_id, data, time_ns + n + 1) for key_id, data, time_ns in batch]
        got_by_id = val_pb2.SubscribeByIdResponse.FromString(other.encode(_updates(shifted)))
        assert _same(got_by_id, _expected(val_pb2.SubscribeByIdResponse, shifted, by_id))


@both
@given(st.floats(width=32), st.floats(), st.integers(0, 2**64 - 1))
def test_a_float_in_its_own_width_is_spliced_bit_for_bit(
    encoder: EntryEncoderFactory, single: float, double: float, time_ns: int
) -> None:
    """The 4 or 8 stored bytes go out as they are: a NaN keeps its payload too."""
    names = {1: "Vehicle.F", 2: "Vehicle.D"}
    signals = {"Vehicle.F": _signal("float"), "Vehicle.D": _signal("double")}
    f, d = encode(single, kind="float32"), encode(double, kind="float")
    assert f[0] == FLOAT32_TAG
    assert d[0] == DOUBLE_TAG
    raw = encoder(
        val_pb2.SubscribeResponse, by_name=True, name_of=names.get, signal_of=signals.get
    ).encode(_updates([(1, f, time_ns), (2, d, time_ns)]))
    assert f[1:] in raw
    assert d[1:] in raw
    got = val_pb2.SubscribeResponse.FromString(raw)
    assert got.entries["Vehicle.F"].value.WhichOneof("typed_value") == "float"
    assert got.entries["Vehicle.D"].value.WhichOneof("typed_value") == "double"
    for name, value in (("Vehicle.F", single), ("Vehicle.D", double)):
        out = getattr(got.entries[name].value, "float" if name.endswith("F") else "double")
        assert out == value or (math.isnan(out) and math.isnan(value))
        ts = got.entries[name].timestamp
        assert ts.seconds * 1_000_000_000 + ts.nanos == time_ns


@both
def test_a_float32_read_as_double_and_a_removed_key_go_their_own_ways(
    encoder: EntryEncoderFactory,
) -> None:
    """A float32 value of a ``double`` signal is widened (protobuf's path); an id whose
    key is gone has no entry; no value yet: an empty datapoint."""
    names = {1: "Vehicle.D", 3: "Vehicle.Empty"}
    signals = {"Vehicle.D": _signal("double"), "Vehicle.Empty": _signal("float")}
    entries = encoder(
        val_pb2.SubscribeResponse, by_name=True, name_of=names.get, signal_of=signals.get
    )
    got = val_pb2.SubscribeResponse.FromString(
        entries.encode(
            _updates([(1, encode(1.5, kind="float32"), 5), (2, encode(2.5), 5), (3, None, 5)])
        )
    )
    assert sorted(got.entries) == ["Vehicle.D", "Vehicle.Empty"]
    assert got.entries["Vehicle.D"].value.double == 1.5
    assert got.entries["Vehicle.D"].timestamp.nanos == 5
    assert not got.entries["Vehicle.Empty"].HasField("value")
    assert not got.entries["Vehicle.Empty"].HasField("timestamp")


@both
def test_an_entry_is_protobufs_own_bytes_on_either_side_of_one_byte_lengths(
    encoder: EntryEncoderFactory,
) -> None:
    """Paths of 80 to 140 bytes put an entry's length on either side of 128, where
    it stops fitting one byte: each response is the bytes protobuf writes."""
    signals = {"float": _signal("float"), "double": _signal("double")}
    for size in range(80, 141):
        for datatype, kind in (("float", "float32"), ("double", "float")):
            name = "V" * size
            batch = [(1, encode(1.5, kind=kind), 1_764_000_000_123_456_789)]
            keys: dict[int, tuple[str | int, Signal | None]] = {1: (name, signals[datatype])}
            raw = encoder(
                val_pb2.SubscribeResponse,
                by_name=True,
                name_of={1: name}.get,
                signal_of=lambda _, d=datatype: signals[d],
            ).encode(_updates(batch))
            expected = _expected(val_pb2.SubscribeResponse, batch, keys).SerializeToString()
            assert raw == expected, (size, datatype)


@both
@pytest.mark.parametrize("datatype", ["float", "double", "int32", None])
def test_a_failed_key_is_an_entry_with_its_time_and_no_value(
    encoder: EntryEncoderFactory, datatype: str | None
) -> None:
    names = {1: "Vehicle.Speed", 2: "Vehicle.Cabin.Temperature"}
    signals = {n: _signal(datatype) for n in names.values()}
    entries = encoder(
        val_pb2.SubscribeResponse, by_name=True, name_of=names.get, signal_of=signals.get
    )
    failed = encode(Failure(FailureCode.SENSOR_FAULT, "open circuit"))
    value = encode(21 if datatype == "int32" else 21.5, datatype=datatype or "double")

    got = val_pb2.SubscribeResponse.FromString(
        entries.encode(_updates([(1, failed, 1_500_000_000), (2, value, 7)]))
    )

    point = got.entries["Vehicle.Speed"]
    assert point.HasField("timestamp")
    assert not point.HasField("value")
    assert (point.timestamp.seconds, point.timestamp.nanos) == (1, 500_000_000)
    assert got.entries["Vehicle.Cabin.Temperature"].value.WhichOneof("typed_value") is not None
