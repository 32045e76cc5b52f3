"""A signal's rules (:func:`vehicle_middleware.vss.rules.check_value`) for floats: its fast path
accepts
exactly what the rules accept, and what it does not accept gets the rules' sentence;
:func:`vehicle_middleware.vss.rules.float_bounds` gives a range they accept whole."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.values import decode, encode
from vehicle_middleware.vss.catalog import Signal
from vehicle_middleware.vss.rules import check_value, float_bounds

FLOAT32_MAX = 3.4028234663852886e38
_BOUNDS = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32)
_VALUES = st.floats() | st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, FLOAT32_MAX, 3.5e38, -3.5e38, 1e300]
)


def _accepted(datatype: str, lo: float | None, hi: float | None, value: float) -> bool:
    """The rules in words: a NaN only without a range; within min and max; a
    single-precision float holds finite values up to FLOAT32_MAX (and the infinities)."""
    if math.isnan(value):
        return lo is None and hi is None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return False
    return not (datatype == "float" and math.isfinite(value) and abs(value) > FLOAT32_MAX)


@given(st.sampled_from(["float", "double"]), _BOUNDS, _BOUNDS, _VALUES)
def test_a_float_is_accepted_exactly_when_the_rules_allow_it(
    datatype: str, lo: float | None, hi: float | None, value: float
) -> None:
    signal = Signal("Vehicle.X", "sensor", datatype, unit="km/h", min=lo, max=hi)
    problem = check_value(signal, value)
    assert (problem is None) == _accepted(datatype, lo, hi, value), problem


def test_a_refused_float_is_named_with_the_rule_it_breaks() -> None:
    speed = Signal("Vehicle.Speed", "sensor", "float", unit="km/h", min=0.0, max=300.0)
    assert check_value(speed, 301.5) == "value 301.5 is above the max 300.0 km/h"
    assert check_value(speed, -1.0) == "value -1.0 is below the min 0.0 km/h"
    assert check_value(speed, math.nan) == (
        "value nan is not a number: the signal's range is 0.0 to 300.0 km/h"
    )
    wide = Signal("Vehicle.W", "sensor", "float")
    assert check_value(wide, 1e39) == (
        "value 1e+39 is outside the range of float (single precision)"
    )
    gear = Signal("Vehicle.Gear", "sensor", "float", allowed=(1.0, 2.0))
    assert check_value(gear, 2.0) is None
    assert check_value(gear, 1.5) == "value 1.5 is not one of the allowed values [1.0, 2.0]"


_SINGLE_RANGE = st.floats(min_value=-1e38, max_value=1e38, allow_nan=False)


@given(_SINGLE_RANGE, _SINGLE_RANGE, st.floats(min_value=0.0, max_value=1.0))
def test_a_float_signal_takes_every_value_of_its_range_as_written_and_as_stored(
    a: float, b: float, where: float
) -> None:
    """Bounds a float cannot hold exactly (max 0.1): a value in the range passes when
    written (a double) and when read back from the store (rounded to single
    precision, which may land just outside the double bound)."""
    lo, hi = min(a, b), max(a, b)
    value = min(hi, max(lo, lo + (hi - lo) * where))
    signal = Signal("Vehicle.X", "sensor", "float", min=lo, max=hi)
    assert check_value(signal, value) is None
    assert check_value(signal, decode(encode(value, datatype="float"))) is None


def test_a_bound_or_allowed_value_in_single_precision_is_met_by_its_stored_value() -> None:
    level = Signal("Vehicle.Level", "sensor", "float", min=-0.1, max=0.1)
    stored = decode(encode(0.1, datatype="float"))
    assert stored == 0.10000000149011612
    assert check_value(level, 0.1) is None
    assert check_value(level, stored) is None
    assert check_value(level, decode(encode(-0.1, datatype="float"))) is None
    assert check_value(level, 0.11) == "value 0.11 is above the max 0.1"
    assert check_value(level, -0.11) == "value -0.11 is below the min -0.1"
    steps = Signal("Vehicle.Step", "sensor", "float", allowed=(0.1, 0.3))
    assert check_value(steps, stored) is None
    assert check_value(steps, 0.2) == "value 0.2 is not one of the allowed values [0.1, 0.3]"
    # A double holds 0.1 as written: no rounding, no slack.
    exact = Signal("Vehicle.Exact", "sensor", "double", max=0.1)
    assert check_value(exact, stored) == "value 0.10000000149011612 is above the max 0.1"


@given(
    st.sampled_from(["float", "double", "int32", "string"]),
    _BOUNDS | st.integers(-10, 10),
    _BOUNDS | st.integers(-10, 10),
    st.sampled_from([(), (1.0, 2.5)]),
    _VALUES,
)
def test_float_bounds_is_a_range_the_rules_accept_whole(
    datatype: str, lo: float | None, hi: float | None, allowed: tuple[float, ...], value: float
) -> None:
    """What a reader of many values (a KUKSA provider's publishes) may accept
    without asking check_value: never a value check_value refuses, and every
    value of min..max within what the datatype holds."""
    signal = Signal("Vehicle.X", "sensor", datatype, min=lo, max=hi, allowed=allowed)
    bounds = float_bounds(signal)
    if datatype not in ("float", "double") or allowed:
        assert bounds is None
        return
    assert bounds is not None
    assert all(type(b) is float for b in bounds)
    if bounds[0] <= value <= bounds[1]:
        assert check_value(signal, value) is None
    elif _accepted(datatype, lo, hi, value) and not math.isnan(value):
        # Outside, only what the datatype's finite range leaves out: an infinity.
        assert math.isinf(value)


def test_float_bounds_leaves_an_integer_bound_no_float_holds_to_the_full_rules() -> None:
    """Compared as a float, 2**53 + 1 would be 2**53: a value below the min would pass."""
    for bound in (2**53 + 1, 10**400):
        assert float_bounds(Signal("Vehicle.X", "sensor", "double", min=bound)) is None
        assert float_bounds(Signal("Vehicle.X", "sensor", "double", max=-bound)) is None
    assert float_bounds(Signal("Vehicle.X", "sensor", "double", min=2**53, max=3)) == (
        2.0**53,
        3.0,
    )
    assert check_value(Signal("Vehicle.X", "sensor", "double", min=2**53 + 1), 2.0**53) is not None
