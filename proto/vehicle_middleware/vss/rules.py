"""What a signal's metadata allows: its datatype, ``min``/``max`` and ``allowed``.

Values here are plain Python: ``bool``, ``int``, ``float``, ``str``, or a
``list`` of one of them for an array datatype (``float[]``). A check returns
``None`` when the value may be written, else a sentence naming the value and
the rule it breaks; the caller adds the key. Integers are accepted for
``float``/``double`` signals (widening is exact enough for VSS); a float is
never accepted for an integer datatype, nor a bool for a number.

A ``float`` signal holds single precision: a value is stored rounded to it, so
a bound or an allowed value is met by a value equal to it in single precision
too (``max`` 0.1 takes 0.1, stored as 0.10000000149011612).

Complexity: O(len(value) * len(allowed)) for arrays, O(len(allowed)) otherwise.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Final

from vehicle_middleware.vss.catalog import Signal

__all__ = ["INT_RANGES", "check_value", "element_type", "float_bounds", "is_array"]

INT_RANGES: Final[dict[str, tuple[int, int]]] = {
    **{f"int{b}": (-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, 2**b - 1) for b in (8, 16, 32, 64)},
}
"""The inclusive range of each integer datatype."""
_FLOAT32_MAX: Final = 3.4028234663852886e38
_FLOAT_RANGES: Final = {"float": _FLOAT32_MAX, "double": math.inf}
"""The finite floats each float datatype holds (the fast path of :func:`check_value`)."""


def is_array(datatype: str) -> bool:
    """Whether ``datatype`` is a VSS array type (``uint8[]``)."""
    return datatype.endswith("[]")


def element_type(datatype: str) -> str:
    """The scalar datatype of an array's elements (the datatype itself for a scalar)."""
    return datatype[:-2] if is_array(datatype) else datatype


def float_bounds(signal: Signal) -> tuple[float, float] | None:
    """The range within which :func:`check_value` accepts any float for ``signal``
    at a glance (its first test): its ``min`` and ``max`` within what its
    datatype holds, as floats. For a caller that judges many values of one
    signal; tests hold the two to the same range.

    None for a signal that is not ``float`` or ``double``, that lists the
    values ``allowed``, or whose ``min`` or ``max`` is an integer no float
    holds exactly (above 2**53: compared as a float it would move). A float
    outside the range (or a NaN) may still be accepted by the full rules (a
    ``float`` signal's bound met in single precision); callers that skip
    :func:`check_value` within the range must ask it outside.
    """
    limit = _FLOAT_RANGES.get(signal.datatype)
    if limit is None or signal.allowed:
        return None
    bounds = []
    for bound, default in ((signal.min, -limit), (signal.max, limit)):
        if bound is None:
            bounds.append(default)
            continue
        try:
            exact = float(bound)
        except OverflowError:
            return None
        if exact != bound:
            return None
        bounds.append(max(exact, -limit) if default < 0 else min(exact, limit))
    return bounds[0], bounds[1]


def check_value(signal: Signal, value: object) -> str | None:
    """``None`` if ``value`` fits the signal's datatype and rule, else what it breaks.

    A datatype this module does not know (a struct, ``timestamp``) is not checked.
    """
    datatype = signal.datatype
    # Most writes: a float to a float or double signal, within its range (a NaN
    # fails the comparisons, ±inf the single-precision bound): accepted here, as the
    # rules below would; anything else is judged by them. The same test as
    # float_bounds' range, inline: this runs for every value a KUKSA client writes.
    if type(value) is float and not signal.allowed and datatype in _FLOAT_RANGES:
        lo, hi = signal.min, signal.max
        if (
            (lo is None or value >= lo)
            and (hi is None or value <= hi)
            and -_FLOAT_RANGES[datatype] <= value <= _FLOAT_RANGES[datatype]
        ):
            return None
    if is_array(datatype):
        if not isinstance(value, list):
            return f"value {_show(value)} is not an array (datatype {datatype})"
        for i, item in enumerate(value):
            problem = _check_scalar(signal, element_type(datatype), item)
            if problem is not None:
                return f"element [{i}]: {problem}"
        return None
    if isinstance(value, list):
        return f"value {_show(value)} is an array; datatype {datatype} is not"
    return _check_scalar(signal, datatype, value)


def _check_scalar(signal: Signal, datatype: str, value: object) -> str | None:
    problem = _check_type(datatype, value)
    if problem is not None:
        return problem
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value != value and (signal.min is not None or signal.max is not None):  # NaN
            return (
                f"value {_show(value)} is not a number: the signal's range is "
                f"{signal.min if signal.min is not None else '-inf'} to "
                f"{signal.max if signal.max is not None else 'inf'}{_unit(signal)}"
            )
        single = datatype == "float"
        lo, hi = signal.min, signal.max
        if lo is not None and value < lo and not (single and value >= _single(lo)):
            return f"value {_show(value)} is below the min {lo}{_unit(signal)}"
        if hi is not None and value > hi and not (single and value <= _single(hi)):
            return f"value {_show(value)} is above the max {hi}{_unit(signal)}"
        if single and signal.allowed and _in(value, _singles(signal.allowed)):
            return None
    if signal.allowed and not _in(value, signal.allowed):
        allowed = ", ".join(_show(a) for a in signal.allowed)
        return f"value {_show(value)} is not one of the allowed values [{allowed}]"
    return None


def _check_type(datatype: str, value: object) -> str | None:
    if datatype == "boolean":
        return None if isinstance(value, bool) else _not_a(value, datatype)
    if datatype == "string":
        return None if isinstance(value, str) else _not_a(value, datatype)
    if datatype in INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            return _not_a(value, datatype)
        lo, hi = INT_RANGES[datatype]
        if not lo <= value <= hi:
            return f"value {value} is outside the range of {datatype} ({lo}..{hi})"
        return None
    if datatype in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _not_a(value, datatype)
        if datatype == "float" and math.isfinite(value) and abs(value) > _FLOAT32_MAX:
            return f"value {_show(value)} is outside the range of float (single precision)"
        return None
    return None


def _single(x: float) -> float:
    """``x`` rounded to single precision, as a ``float`` signal stores it (beyond its
    range: as it is)."""
    try:
        rounded: float = _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    except (OverflowError, struct.error):
        return x
    return rounded


@functools.cache  # a catalog's allowed lists: a few, asked on every refused value
def _singles(allowed: tuple[str | int | float, ...]) -> tuple[str | int | float, ...]:
    return tuple(
        _single(a) if isinstance(a, float | int) and not isinstance(a, bool) else a for a in allowed
    )


_FLOAT32: Final = struct.Struct("<f")


def _in(value: object, allowed: tuple[str | int | float, ...]) -> bool:
    # 1 == True in Python: compare booleans only with booleans.
    return any(type(a) is type(value) and a == value for a in allowed) or (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and any(
            isinstance(a, int | float) and not isinstance(a, bool) and a == value for a in allowed
        )
    )


def _not_a(value: object, datatype: str) -> str:
    kind = "array" if isinstance(value, list) else type(value).__name__
    return f"value {_show(value)} ({kind}) is not a {datatype}"


def _unit(signal: Signal) -> str:
    return f" {signal.unit}" if signal.unit else ""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
