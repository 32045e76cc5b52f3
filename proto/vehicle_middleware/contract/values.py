"""The value encoding of this project's providers and apps (``vehicle.value.v1``).

The middleware stores and delivers values as bytes. The providers in
``providers/`` write, and the sample apps read, a serialized
``vehicle.value.v1.Value`` (see ``proto/vehicle/value/v1/value.proto``): one
typed value, a few bytes, decodable from any language with protobuf. Keys
that a VSS catalog describes (``serve --vss``) only take values of this
encoding that fit their datatype; the KUKSA API reads and writes them typed.

    >>> decode(encode(21.5))
    21.5
    >>> decode_value(encode([1.5, 2.0], datatype="float[]"))
    [1.5, 2.0]

Which field a value takes (its *kind*): ``bool``, ``int`` (int64; uint64 up to
2^63-1 too, so the bytes of existing values never change), ``uint`` (uint64
above that), ``float`` (double), ``float32`` (a VSS ``float`` written typed),
``string``, and the arrays ``bools``, ``ints``, ``uints``, ``floats32``,
``floats``, ``strings``.

Instead of a value, a provider may write a :class:`Failure` (the kind
``failure``): the signal has no valid value now, and why. Any key takes one,
whatever its datatype; :func:`decode` returns it as it returns a value, and
:func:`is_failure` tells one from a value without decoding the rest.

    >>> decode(encode(Failure(FailureCode.SENSOR_FAULT, "open circuit")))
    Failure(code=<FailureCode.SENSOR_FAULT: 1>, detail='open circuit')
"""

from __future__ import annotations

import enum
import functools
import struct
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError
from vehicle_middleware.proto.vehicle.value.v1 import value_pb2
from vehicle_middleware.proto.vehicle.value.v1.value_pb2 import (
    BoolArray,
    DoubleArray,
    Float32Array,
    IntArray,
    StringArray,
    UintArray,
    Value,
)
from vehicle_middleware.vss.rules import element_type, is_array

__all__ = [
    "DOUBLE_TAG",
    "FAILURE_DETAIL_MAX",
    "FAILURE_TAG",
    "FLOAT32_TAG",
    "KINDS",
    "Data",
    "Failure",
    "FailureCode",
    "Scalar",
    "ValueEncodingError",
    "decode",
    "decode_kind",
    "decode_value",
    "encode",
    "failure_problem",
    "is_failure",
    "kind_of_datatype",
]

Scalar = bool | int | float | str
"""What a scalar value holds: a VSS boolean, integer, floating-point number or string."""
Data = Scalar | list[bool] | list[int] | list[float] | list[str]
"""A scalar or an array (a VSS ``T[]``) of one of them."""

_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_UINT_MAX = 2**64 - 1
_ARRAYS: Final = {
    "bools": BoolArray,
    "ints": IntArray,
    "uints": UintArray,
    "floats32": Float32Array,
    "floats": DoubleArray,
    "strings": StringArray,
}
KINDS: Final = frozenset({"bool", "int", "uint", "float", "float32", "string", *_ARRAYS})
"""The fields of ``vehicle.value.v1.Value`` that hold a value, by name (``failure``
is the one that holds none)."""
FAILURE_DETAIL_MAX: Final = 256
"""The most characters a failure's ``detail`` holds."""
FAILURE_TAG: Final = 0x6A
"""The first byte of a failure (field 13, length-delimited); no value begins so,
though opaque bytes may (:func:`is_failure` makes sure)."""


class FailureCode(enum.IntEnum):
    """Why a signal has no valid value (``vehicle.value.v1.FailureCode``)."""

    UNSPECIFIED = 0
    SENSOR_FAULT = 1
    OUT_OF_RANGE = 2
    NOT_AVAILABLE = 3
    NETWORK_ERROR = 4
    OVERLOAD = 5

    @property
    def label(self) -> str:
        """The code as records and reports spell it: ``sensor_fault``, ``overload``."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Failure:
    """A provider's word that a signal has no valid value now: a ``code`` and a
    ``detail`` for people (at most :data:`FAILURE_DETAIL_MAX` characters)."""

    code: FailureCode = FailureCode.UNSPECIFIED
    detail: str = ""


_SCALAR_KIND: Final = {
    "boolean": "bool",
    "string": "string",
    "float": "float32",
    "double": "float",
    **{f"int{b}": "int" for b in (8, 16, 32, 64)},
    **{f"uint{b}": "int" for b in (8, 16, 32)},
    "uint64": "int",  # "uint" above int64 (see encode)
}
_ARRAY_OF: Final = {
    "bool": "bools",
    "int": "ints",
    "uint": "uints",
    "float": "floats",
    "float32": "floats32",
    "string": "strings",
}


# The bytes of a Value holding one double (field 3, fixed64) or one float (field 6,
# fixed32): the tag, then the number little-endian. Most signals are numbers, and
# every typed write and every KUKSA delivery encodes or decodes one, so these two
# are done without a message, a fraction of protobuf's cost; tests check them
# against protobuf's own bytes for every kind of float.
DOUBLE_TAG: Final = 0x19
"""The first of the 9 bytes of a ``float`` (double) value; the other 8 are the number,
little-endian (protobuf's fixed64), which another message's double field can take as they are."""
FLOAT32_TAG: Final = 0x35
"""The first of the 5 bytes of a ``float32`` value; the other 4 are the number,
little-endian (protobuf's fixed32)."""
_DOUBLE_PREFIX: Final = bytes([DOUBLE_TAG])
_FLOAT32_PREFIX: Final = bytes([FLOAT32_TAG])
_DOUBLE: Final = struct.Struct("<d")
_FLOAT32: Final = struct.Struct("<f")


class ValueEncodingError(ValueError):
    """Bytes that are not a v1 value, or a Python value that has no encoding."""


@functools.cache  # a catalog has a few dozen datatypes; every typed write asks
def kind_of_datatype(datatype: str) -> str | None:
    """The kind a VSS datatype's values are written as (None: a datatype with no encoding)."""
    scalar = _SCALAR_KIND.get(element_type(datatype))
    if scalar is None:
        return None
    if is_array(datatype):
        return "uints" if datatype == "uint64[]" else _ARRAY_OF[scalar]
    return scalar


def encode(value: Data | Failure, *, datatype: str | None = None, kind: str | None = None) -> bytes:
    """The bytes of ``value`` (bool before int: ``True`` is a bool, not 1).

    Args:
        value: a scalar, or a list of scalars of one type.
        datatype: a VSS datatype (``float``, ``uint8[]``): chooses the kind, so
            a VSS float is single precision and an empty array has a type.
        kind: the field to write (see :data:`KINDS`); wins over ``datatype``.
        A :class:`Failure` is encoded as one whatever ``datatype`` and ``kind`` say.
    Raises:
        ValueEncodingError: no encoding (a dict, mixed or empty untyped list,
            an int outside int64/uint64, a value that does not fit ``kind``, a
            failure's detail longer than :data:`FAILURE_DETAIL_MAX`).
    """
    if type(value) is Failure:
        return _encode_failure(value)
    if kind is None and datatype is not None:
        kind = kind_of_datatype(datatype)
    if type(value) is float:
        if kind == "float":
            return _DOUBLE_PREFIX + _DOUBLE.pack(value)
        if kind == "float32" and -3.4e38 <= value <= 3.4e38:  # beyond: protobuf's inf, below
            return _FLOAT32_PREFIX + _FLOAT32.pack(value)
    if kind is None:
        kind = _infer_kind(value)
    elif kind not in KINDS:
        raise ValueEncodingError(f"unknown kind {kind!r}; one of {sorted(KINDS)}")
    if (
        kind == "int"
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value > _INT_MAX
    ):
        kind = "uint"  # uint64 above int64's range
    message = Value()
    try:
        if kind in _ARRAYS:
            if not isinstance(value, list):
                raise ValueEncodingError(f"{kind} needs a list, got {type(value).__name__}")
            getattr(message, kind).values.extend(value)
            if kind == "ints" and not all(_INT_MIN <= v <= _INT_MAX for v in value):  # type: ignore[operator]
                raise ValueEncodingError("an element is outside int64; use uints")
        else:
            _check_scalar(kind, value)
            setattr(message, kind, value)
    except (TypeError, ValueError) as e:
        if isinstance(e, ValueEncodingError):
            raise
        raise ValueEncodingError(f"{_show(value)} does not fit a {kind} value: {e}") from e
    return message.SerializeToString()


def _encode_failure(failure: Failure) -> bytes:
    problem = failure_problem(failure)
    if problem is not None:
        raise ValueEncodingError(problem)
    message = Value()
    message.failure.code = int(failure.code)  # type: ignore[assignment]
    message.failure.detail = failure.detail
    return message.SerializeToString()


def failure_problem(failure: Failure) -> str | None:
    """Why ``failure`` may not be written (None: it may): a ``detail`` longer than
    :data:`FAILURE_DETAIL_MAX`, named with the limit."""
    if len(failure.detail) > FAILURE_DETAIL_MAX:
        return f"failure.detail has {len(failure.detail)} characters; at most {FAILURE_DETAIL_MAX}"
    return None


def is_failure(data: bytes | None) -> bool:
    """Whether ``data`` holds a :class:`Failure` rather than a value.

    Its first byte tells most bytes apart at once (no value begins as a failure
    does); only bytes that begin so (opaque text starting ``j``) are parsed.
    """
    if not data or data[0] != FAILURE_TAG:
        return False
    message = Value()
    try:
        message.ParseFromString(data)
    except DecodeError:
        return False
    return bool(message.WhichOneof("value") == "failure")


def _failure_of(message: value_pb2.Failure) -> Failure:
    try:
        code = FailureCode(message.code)
    except ValueError:  # a code added after this reader: it says what it knows
        code = FailureCode.UNSPECIFIED
    return Failure(code, message.detail)


def _check_scalar(kind: str, value: object) -> None:
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "uint": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "float32": isinstance(value, int | float) and not isinstance(value, bool),
        "string": isinstance(value, str),
    }[kind]
    if not ok:
        raise ValueEncodingError(f"{_show(value)} ({type(value).__name__}) is not a {kind} value")
    if kind == "int" and not _INT_MIN <= value <= _INT_MAX:  # type: ignore[operator]
        raise ValueEncodingError(f"integer {value} is outside int64, the range of a v1 int")
    if kind == "uint" and not 0 <= value <= _UINT_MAX:  # type: ignore[operator]
        raise ValueEncodingError(f"integer {value} is outside uint64")


def _infer_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if not _INT_MIN <= value <= _UINT_MAX:
            raise ValueEncodingError(
                f"integer {value} is outside int64 and uint64, the ranges of a v1 value"
            )
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        kinds = {_infer_kind(v) for v in value}
        if kinds == {"int"} and any(v > _INT_MAX for v in value):
            return "uints"
        if kinds <= {"int", "float"} and "float" in kinds:
            return "floats"
        if len(kinds) == 1:
            return _ARRAY_OF[kinds.pop()]
        if not kinds:
            raise ValueEncodingError("an empty array has no type: give its datatype")
        raise ValueEncodingError(f"an array mixes {sorted(kinds)}: give one type")
    raise ValueEncodingError(
        f"{type(value).__name__} has no v1 encoding (bool, int, float, str or a list of one)"
    )


def decode_kind(data: bytes) -> tuple[Data | Failure, str]:
    """The value in ``data`` and its kind (the field it was written in): a
    :class:`Failure` and ``failure`` for a failure.

    Raises:
        ValueEncodingError: not a v1 value (not protobuf, or no value set, e.g.
            bytes written by another encoding or a newer, unknown field).
    """
    size = len(data)
    if size == 9 and data[0] == DOUBLE_TAG:
        return _DOUBLE.unpack_from(data, 1)[0], "float"
    if size == 5 and data[0] == FLOAT32_TAG:
        return _FLOAT32.unpack_from(data, 1)[0], "float32"
    message = Value()
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise ValueEncodingError(f"not a vehicle.value.v1.Value ({len(data)} bytes): {e}") from e
    field = message.WhichOneof("value")
    if field is None:
        raise ValueEncodingError(f"no value set in {len(data)} bytes (not a v1 value?)")
    if field in _ARRAYS:
        return list(getattr(message, field).values), field
    if field == "failure":
        return _failure_of(message.failure), field
    out: Data = getattr(message, field)
    return out, field


def decode(data: bytes) -> Scalar | Failure:
    """The scalar in ``data`` (what every value was before arrays were added), or
    the :class:`Failure` written instead of one.

    Raises:
        ValueEncodingError: as :func:`decode_kind`, and for an array (read
            those with :func:`decode_value`).
    """
    value, kind = decode_kind(data)
    if isinstance(value, list):
        raise ValueEncodingError(f"an array ({kind}), not a scalar: read it with decode_value")
    return value


def decode_value(data: bytes) -> Data | Failure:
    """The value in ``data``: a scalar, or a list for an array; or a :class:`Failure`.

    Raises:
        ValueEncodingError: as :func:`decode_kind`.
    """
    return decode_kind(data)[0]


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
