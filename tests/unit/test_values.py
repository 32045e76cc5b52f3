"""The vehicle.value.v1 encoding: round trips, the documented bytes, clear errors."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.values import (
    FAILURE_DETAIL_MAX,
    Failure,
    FailureCode,
    ValueEncodingError,
    decode,
    decode_kind,
    encode,
    is_failure,
)
from vehicle_middleware.proto.vehicle.value.v1.value_pb2 import Value
from vehicle_middleware.server.signals import value_check
from vehicle_middleware.vss import Signal


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


# -- failures: the provider's word that a signal has no valid value ----------------------


@given(st.sampled_from(FailureCode), st.text(max_size=FAILURE_DETAIL_MAX))
def test_a_failure_round_trips_and_is_told_from_a_value(code: FailureCode, detail: str) -> None:
    data = encode(Failure(code, detail))
    assert decode(data) == Failure(code, detail)
    assert decode_kind(data) == (Failure(code, detail), "failure")
    assert is_failure(data)


def test_a_failure_is_the_bytes_the_proto_documents() -> None:
    assert encode(Failure(FailureCode.SENSOR_FAULT)).hex() == "6a020801"
    assert encode(Failure(FailureCode.SENSOR_FAULT), datatype="float").hex() == "6a020801"


@pytest.mark.parametrize(
    "data", [encode(1.5), encode("j"), b"json text", b"j", b"", encode([1, 2]), b"\x6a\x02\x08"]
)
def test_values_and_opaque_bytes_are_not_failures(data: bytes) -> None:
    assert not is_failure(data)


def test_a_code_this_reader_does_not_know_reads_as_unspecified() -> None:
    message = Value()
    message.failure.code = 99  # type: ignore[assignment]
    message.failure.detail = "newer"
    data = message.SerializeToString()
    assert decode(data) == Failure(FailureCode.UNSPECIFIED, "newer")


def test_a_failure_detail_longer_than_the_limit_is_refused_naming_it() -> None:
    with pytest.raises(ValueEncodingError, match=r"failure.detail has 257 characters; at most 256"):
        encode(Failure(FailureCode.OVERLOAD, "x" * 257))


@pytest.mark.parametrize("datatype", ["float", "double", "int8", "uint64", "string", "boolean[]"])
def test_a_typed_key_takes_a_failure_whatever_its_datatype(datatype: str) -> None:
    check = value_check(Signal("Vehicle.X", "sensor", datatype, min=0, max=1))
    assert check is not None
    assert check(encode(Failure(FailureCode.OUT_OF_RANGE, "above 1"))) is None
    long = Value()
    long.failure.detail = "x" * 300
    assert check(long.SerializeToString()) == "failure.detail has 300 characters; at most 256"
