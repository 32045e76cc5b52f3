"""The vehicle.value.v1 encoding: round trips, the documented bytes, clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vmw.contract.values import ValueEncodingError, decode, encode


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
