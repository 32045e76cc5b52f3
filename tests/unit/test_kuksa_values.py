"""Typed round trips, property-based: a KUKSA value of every datatype, stored and read back.

No server: the conversions (``vehicle_middleware.server.kuksa.convert``) and the store's
encoding (``vehicle_middleware.contract.values``), for keys typed by a catalog and for
opaque keys.
"""

from __future__ import annotations

import math
import struct

from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.values import ValueEncodingError, decode_kind, encode
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2 as t1
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.signals import value_check
from vehicle_middleware.vss import INT_RANGES, Signal, check_value

_WIRE = {
    **{f"int{b}": "int32" for b in (8, 16, 32)},
    "int64": "int64",
    **{f"uint{b}": "uint32" for b in (8, 16, 32)},
    "uint64": "uint64",
    "float": "float",
    "double": "double",
    "boolean": "bool",
    "string": "string",
}


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _scalar(datatype: str) -> st.SearchStrategy[object]:
    if datatype in INT_RANGES:
        lo, hi = INT_RANGES[datatype]
        return st.integers(lo, hi)
    if datatype == "float":
        return st.floats(width=32, allow_nan=False)
    if datatype == "double":
        return st.floats(allow_nan=False)
    if datatype == "boolean":
        return st.booleans()
    return st.text(max_size=20)


@st.composite
def typed(draw: st.DrawFn) -> tuple[str, object]:
    scalar = draw(st.sampled_from(sorted(_WIRE)))
    if draw(st.booleans()):
        return f"{scalar}[]", draw(st.lists(_scalar(scalar), max_size=8))
    return scalar, draw(_scalar(scalar))


def _wire_value(datatype: str, value: object) -> t2.Value:
    message = t2.Value()
    scalar = datatype.removesuffix("[]")
    field = _WIRE[scalar]
    if datatype.endswith("[]"):
        getattr(message, f"{field}_array").values.extend(value)  # type: ignore[call-overload]
    else:
        setattr(message, field, value)
    return message


def _same(a: object, b: object) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


@given(typed())
def test_every_kuksa_type_round_trips_through_a_typed_key(case: tuple[str, object]) -> None:
    datatype, value = case
    signal = Signal("Vehicle.X", "sensor", datatype)
    sent = _wire_value(datatype, value)
    data = convert.to_store("Vehicle.X", signal, sent, "typed_value")
    check = value_check(signal)
    assert check is not None
    assert check(data) is None  # what KUKSA wrote passes the store's own check
    back = t2.Value()
    assert convert.set_wire(back, data, signal)
    assert back == sent  # the same wire field and value, bit for bit
    v1_back = t1.Datapoint()
    assert convert.set_wire(v1_back, data, signal)
    assert convert.v2_value_of_v1(v1_back) == sent


@given(typed())
def test_an_opaque_key_keeps_the_value_and_its_kind(case: tuple[str, object]) -> None:
    datatype, value = case
    sent = _wire_value(datatype, value)
    data = convert.to_store("Vehicle.X", None, sent, "typed_value")
    stored, _ = decode_kind(data)
    expected = value
    if datatype.startswith("float"):
        expected = [_f32(v) for v in value] if isinstance(value, list) else _f32(value)  # type: ignore[arg-type]
    assert _same(stored, expected)
    back = t2.Value()
    assert convert.set_wire(back, data, None)
    again = convert.to_store("Vehicle.X", None, back, "typed_value")
    assert again == data  # reading and writing back changes nothing


@given(st.sampled_from(sorted(INT_RANGES)), st.integers(-(2**70), 2**70))
def test_an_integer_outside_its_datatype_is_refused_by_the_store_check(
    datatype: str, value: int
) -> None:
    lo, hi = INT_RANGES[datatype]
    check = value_check(Signal("Vehicle.X", "sensor", datatype))
    assert check is not None
    if -(2**63) <= value < 2**64:
        problem = check(encode(value))
        assert (problem is None) == (lo <= value <= hi)
        if problem is not None:
            assert problem == f"value {value} is outside the range of {datatype} ({lo}..{hi})"


_NUMBERS = st.floats() | st.sampled_from([math.nan, math.inf, -0.0, 3.4028234663852886e38, 1e300])
_LIMITS = (
    st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.integers(-9, 9)
)


@given(
    st.sampled_from(["float", "double"]),
    _LIMITS,
    _LIMITS,
    st.sampled_from([(), (1.0, 2.5)]),
    st.data(),
)
def test_a_float_signals_check_gives_the_full_rules_verdict(
    datatype: str,
    lo: float | None,
    hi: float | None,
    allowed: tuple[float, ...],
    data: st.DataObject,
) -> None:
    """The check of a float or double signal reads a stored number where it lies:
    whatever the bytes, its verdict is the full rules' (decode, then check_value).
    The numbers: any, and those next to a bound."""
    signal = Signal("Vehicle.X", "sensor", datatype, min=lo, max=hi, allowed=allowed)
    check = value_check(signal)
    assert check is not None
    near = [float(b) for b in (lo, hi) if b is not None]
    numbers = _NUMBERS
    if near:
        numbers |= st.builds(
            lambda b, d: b + d, st.sampled_from(near), st.sampled_from([-1, -1e-6, 0, 1e-6, 1])
        )
    stored = data.draw(
        st.one_of(
            numbers.map(lambda n: encode(n, kind="float")),
            numbers.map(_as_float32),
            st.integers(-(2**63), 2**63 - 1).map(encode),
            st.binary(max_size=10),
        )
    )
    try:
        value, _ = decode_kind(stored)
    except ValueEncodingError:
        assert check(stored) is not None
        return
    assert check(stored) == check_value(signal, value)


def _as_float32(number: float) -> bytes:
    """A number stored single precision (its nearest float32, or an infinity)."""
    try:
        return encode(number, kind="float32")
    except ValueEncodingError:  # beyond the single-precision range
        return encode(math.copysign(math.inf, number), kind="float32")
