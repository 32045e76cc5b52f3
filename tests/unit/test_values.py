"""The vehicle.value.v1 encoding: round trips, the documented bytes, clear errors."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.values import ValueEncodingError, decode, decode_kind, encode
from vehicle_middleware.proto.vehicle.value.v1.value_pb2 import Value


@given(
    st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False),
        st.text(),
    )
)
def test_every_scalar_round_trips_with_its_type(value: bool | int | float | str) -> None:
    back = decode(encode(value))
    assert back == value
    assert type(back) is type(value)


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [(121.2, "19cdcccccccc4c5e40"), (20, "1028"), (True, "0801"), ("P3", "22025033")],
)
def test_encodings_are_the_bytes_the_proto_documents(value: object, hex_bytes: str) -> None:
    assert encode(value).hex() == hex_bytes  # type: ignore[arg-type]


def test_false_and_zero_are_values_not_absent() -> None:
    assert decode(encode(False)) is False
    assert decode(encode(0)) == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [(2**64, "outside int64 and uint64"), (None, "NoneType has no v1 encoding"), (b"x", "bytes")],
)
def test_values_without_an_encoding_are_refused_by_name(value: object, message: str) -> None:
    with pytest.raises(ValueEncodingError, match=message):
        encode(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("data", "message"), [(b"", "no value set"), (b"\xff\xff", "not a")])
def test_bytes_that_are_not_a_value_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ValueEncodingError, match=message):
        decode(data)


# -- the number fast path: the same bytes as protobuf's, both ways -----------------------

_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 5e-324, -5e-324, 1.4e-45, 3.4e38, 3.4028235e38, 3.5e38, 1e300, math.nan]
)


@given(_FLOATS)
def test_a_double_encodes_and_decodes_as_protobuf_does(value: float) -> None:
    data = encode(value, datatype="double")
    assert data == Value(float=value).SerializeToString()
    back, kind = decode_kind(data)
    assert kind == "float"
    assert struct.pack("<d", back) == struct.pack("<d", value)  # NaN and -0.0 included


@given(_FLOATS)
def test_a_float_encodes_and_decodes_as_protobuf_does(value: float) -> None:
    data = encode(value, datatype="float")
    assert data == Value(float32=value).SerializeToString()
    back, kind = decode_kind(data)
    expected = Value()
    expected.ParseFromString(data)
    assert kind == "float32"
    assert struct.pack("<f", back) == struct.pack("<f", expected.float32)
