"""The value encoding of this project's providers and apps (``vehicle.value.v1``).

The middleware stores and delivers values as opaque bytes. The providers in
``providers/`` write, and the sample apps read, a serialized
``vehicle.value.v1.Value`` (see ``proto/vehicle/value/v1/value.proto``): one
typed scalar, a few bytes, decodable from any language with protobuf.

    >>> decode(encode(21.5))
    21.5
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from vehicle.value.v1.value_pb2 import Value

__all__ = ["Scalar", "ValueEncodingError", "decode", "encode"]

Scalar = bool | int | float | str
"""What a value holds: a VSS boolean, integer, floating-point number or string."""

_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


class ValueEncodingError(ValueError):
    """Bytes that are not a v1 value, or a Python value that has no encoding."""


def encode(value: Scalar) -> bytes:
    """The bytes of ``value`` (bool before int: ``True`` is a bool, not 1).

    Raises:
        ValueEncodingError: not a bool/int/float/str, or an int outside int64.
    """
    if isinstance(value, bool):
        return Value(bool=value).SerializeToString()
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValueEncodingError(f"integer {value} is outside int64, the range of a v1 value")
        return Value(int=value).SerializeToString()
    if isinstance(value, float):
        return Value(float=value).SerializeToString()
    if isinstance(value, str):
        return Value(string=value).SerializeToString()
    raise ValueEncodingError(f"{type(value).__name__} has no v1 encoding (bool, int, float or str)")


def decode(data: bytes) -> Scalar:
    """The scalar in ``data``.

    Raises:
        ValueEncodingError: not a v1 value (not protobuf, or no value set, e.g.
            bytes written by another encoding or a newer, unknown field).
    """
    message = Value()
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise ValueEncodingError(f"not a vehicle.value.v1.Value ({len(data)} bytes): {e}") from e
    field = message.WhichOneof("value")
    if field is None:
        raise ValueEncodingError(f"no value set in {len(data)} bytes (not a v1 value?)")
    out: Scalar = getattr(message, field)
    return out
