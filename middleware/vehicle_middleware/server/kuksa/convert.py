"""Translation between KUKSA.val (v1, v2) messages and the middleware's keys and values.

The only place that knows both. A KUKSA value is a oneof of typed fields
(``int32``, ``uint64``, ``float_array``, ...); the V-Store holds
``vehicle.value.v1`` bytes (:mod:`vehicle_middleware.contract.values`). A key a VSS
catalog describes is read and written in the wire type of its datatype
(int8/int16/int32 as ``int32``, uint8/uint16/uint32 as ``uint32``, ``float``
as ``float``, arrays alike); an opaque key is read in the wire type of the
kind it was written in, and its metadata reports the datatype that kind
implies (no value: unspecified).

v1 and v2 share field names for values (``Datapoint`` / ``Value``), so the
value functions take the message and the name of its oneof.

A failure (:class:`vehicle_middleware.contract.values.Failure`) is what KUKSA
calls a datapoint without a value: a provider that publishes one, or says
its source failed (v2 ``ProviderErrorIndication``), stores a failure, and a
key that holds one is read as a datapoint with its timestamp and no value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from vehicle_middleware.contract.values import (
    Data,
    Failure,
    FailureCode,
    ValueEncodingError,
    decode_kind,
    encode,
    kind_of_datatype,
)
from vehicle_middleware.ess import Filter, InvalidFilterError
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2 as t1
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.server.errors import InvalidRequestError
from vehicle_middleware.vss import INT_RANGES, Signal, check_value, element_type, is_array
from vehicle_middleware.vstore import InvalidValueError, UnknownKeyError

if TYPE_CHECKING:
    from vehicle_middleware.server.actuation import Forward

__all__ = [
    "DATATYPE_TO_PB",
    "ENTRY_TYPE_TO_PB",
    "NOT_AVAILABLE",
    "actuation_request",
    "datatype_of",
    "from_wire",
    "metadata_v1",
    "metadata_v2",
    "provider_failure",
    "refusal",
    "set_timestamp",
    "set_wire",
    "signal_name",
    "source_time",
    "time_ns_of",
    "to_store",
    "v1_error",
    "v2_error",
    "v2_value_of_v1",
    "value_field",
]

DATATYPE_TO_PB: Final[dict[str, int]] = {
    "string": t2.DATA_TYPE_STRING,
    "boolean": t2.DATA_TYPE_BOOLEAN,
    "int8": t2.DATA_TYPE_INT8,
    "int16": t2.DATA_TYPE_INT16,
    "int32": t2.DATA_TYPE_INT32,
    "int64": t2.DATA_TYPE_INT64,
    "uint8": t2.DATA_TYPE_UINT8,
    "uint16": t2.DATA_TYPE_UINT16,
    "uint32": t2.DATA_TYPE_UINT32,
    "uint64": t2.DATA_TYPE_UINT64,
    "float": t2.DATA_TYPE_FLOAT,
    "double": t2.DATA_TYPE_DOUBLE,
    "string[]": t2.DATA_TYPE_STRING_ARRAY,
    "boolean[]": t2.DATA_TYPE_BOOLEAN_ARRAY,
    "int8[]": t2.DATA_TYPE_INT8_ARRAY,
    "int16[]": t2.DATA_TYPE_INT16_ARRAY,
    "int32[]": t2.DATA_TYPE_INT32_ARRAY,
    "int64[]": t2.DATA_TYPE_INT64_ARRAY,
    "uint8[]": t2.DATA_TYPE_UINT8_ARRAY,
    "uint16[]": t2.DATA_TYPE_UINT16_ARRAY,
    "uint32[]": t2.DATA_TYPE_UINT32_ARRAY,
    "uint64[]": t2.DATA_TYPE_UINT64_ARRAY,
    "float[]": t2.DATA_TYPE_FLOAT_ARRAY,
    "double[]": t2.DATA_TYPE_DOUBLE_ARRAY,
}
"""VSS datatype -> KUKSA DataType (v1 and v2 share the numbers)."""
ENTRY_TYPE_TO_PB: Final[dict[str, int]] = {
    "attribute": t2.ENTRY_TYPE_ATTRIBUTE,
    "sensor": t2.ENTRY_TYPE_SENSOR,
    "actuator": t2.ENTRY_TYPE_ACTUATOR,
}

# The wire field of each VSS datatype.
_WIRE_OF_DATATYPE: Final[dict[str, str]] = {
    "string": "string",
    "boolean": "bool",
    "int8": "int32",
    "int16": "int32",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint32",
    "uint16": "uint32",
    "uint32": "uint32",
    "uint64": "uint64",
    "float": "float",
    "double": "double",
}
# The wire field of each value kind of an opaque key, and the datatype it implies.
_WIRE_OF_KIND: Final[dict[str, tuple[str, str]]] = {
    "bool": ("bool", "boolean"),
    "int": ("int64", "int64"),
    "uint": ("uint64", "uint64"),
    "float": ("double", "double"),
    "float32": ("float", "float"),
    "string": ("string", "string"),
    "bools": ("bool_array", "boolean[]"),
    "ints": ("int64_array", "int64[]"),
    "uints": ("uint64_array", "uint64[]"),
    "floats": ("double_array", "double[]"),
    "floats32": ("float_array", "float[]"),
    "strings": ("string_array", "string[]"),
}
# The value kind a wire field is stored as, for an opaque key.
_KIND_OF_WIRE: Final[dict[str, str]] = {
    "bool": "bool",
    "string": "string",
    "int32": "int",
    "int64": "int",
    "uint32": "int",
    "uint64": "int",  # encode() moves values above int64 to "uint"
    "float": "float32",
    "double": "float",
    "bool_array": "bools",
    "string_array": "strings",
    "int32_array": "ints",
    "int64_array": "ints",
    "uint32_array": "ints",
    "uint64_array": "uints",
    "float_array": "floats32",
    "double_array": "floats",
}
_FLOAT_KIND: Final = {d: kind_of_datatype(d) for d in ("float", "double")}
"""The value kind of each floating-point VSS datatype (looked up once)."""
NOT_AVAILABLE: Final = encode(Failure(FailureCode.NOT_AVAILABLE))
"""The stored bytes of a datapoint published without a value (KUKSA's "not available")."""
_PROVIDER_ERRORS: Final[dict[int, bytes]] = {
    t2.CODE_NETWORK_ERROR: encode(Failure(FailureCode.NETWORK_ERROR)),
    t2.CODE_OVERLOAD: encode(Failure(FailureCode.OVERLOAD)),
}
_PROVIDER_ERROR_OTHER: Final = encode(Failure(FailureCode.UNSPECIFIED))


def provider_failure(error: int) -> bytes:
    """The stored failure of a v2 ``ProviderErrorIndication``'s ``provider_error``:
    network and overload as themselves, any other as unspecified."""
    return _PROVIDER_ERRORS.get(error, _PROVIDER_ERROR_OTHER)


def set_timestamp(ts: Timestamp, time_ns: int) -> None:
    """Fill ``ts`` (a message's field, in place) with the store's ``time_ns``."""
    ts.seconds, ts.nanos = divmod(time_ns, 1_000_000_000)


_NS_PER_S: Final = 1_000_000_000
_MAX_TIME_NS: Final = 2**64 - 1  # the store keeps a time as ns since 1970 in a uint64


def source_time(point: t1.Datapoint | t2.Datapoint, field: str) -> int | None:
    """A datapoint's timestamp as the store's ``time_ns`` (None: none given, or zero:
    the middleware's arrival time). Raises as :func:`time_ns_of`."""
    ts = point.timestamp  # unset reads as zero, which means none given too
    return time_ns_of(ts.seconds, ts.nanos, field) or None


def time_ns_of(seconds: int, nanos: int, field: str) -> int:
    """The time in ns since 1970 of the ``Timestamp`` of the datapoint ``field``.

    Raises:
        InvalidRequestError: ``nanos`` outside 0..999,999,999, or a time before
            1970 or past what a uint64 of nanoseconds holds (2554-07-21), naming
            ``field``'s timestamp.
    """
    time_ns = seconds * _NS_PER_S + nanos
    if not 0 <= nanos < _NS_PER_S:
        raise InvalidRequestError(f"{field}.timestamp.nanos", f"{nanos} is not in 0..999999999")
    if not 0 <= time_ns <= _MAX_TIME_NS:
        raise InvalidRequestError(
            f"{field}.timestamp",
            f"{seconds} s since 1970 is outside 0..{_MAX_TIME_NS // _NS_PER_S} "
            "(1970-01-01 to 2554-07-21, nanoseconds in a uint64)",
        )
    return time_ns


@functools.cache  # a catalog has a few dozen datatypes; every delivery asks
def _wire_field(datatype: str) -> str | None:
    scalar = _WIRE_OF_DATATYPE.get(element_type(datatype))
    if scalar is None:
        return None
    return f"{scalar}_array" if is_array(datatype) else scalar


def datatype_of(signal: Signal | None, data: bytes | None) -> str | None:
    """The VSS datatype a KUKSA client is told: the catalog's, else the stored value's."""
    if signal is not None:
        return signal.datatype
    if data is None:
        return None
    try:
        _, kind = decode_kind(data)
    except ValueEncodingError:
        return None
    known = _WIRE_OF_KIND.get(kind)  # a failure implies no datatype
    return None if known is None else known[1]


def from_wire(message: Message, oneof: str) -> tuple[Data, str] | None:
    """``(value, wire field)`` of a KUKSA Datapoint (v1) or Value (v2); None if unset."""
    field = message.WhichOneof(oneof)
    if field is None:
        return None
    raw = getattr(message, field)
    if field.endswith("_array"):
        return list(raw.values), field
    out: Data = raw
    return out, field


def to_store(key: str, signal: Signal | None, message: Message, oneof: str) -> bytes:
    """The V-Store bytes of a KUKSA value written to ``key``.

    A typed key takes a value of its datatype's category (any integer field
    for an integer datatype, in range; float or double for float/double;
    arrays alike) and stores it in its datatype's kind; an opaque key stores
    the value in the kind of the wire field.

    A message without a value stores :data:`NOT_AVAILABLE`, a failure, as the
    KUKSA databroker takes a datapoint without a value to mean "not available".

    Raises:
        InvalidValueError: the wrong type, or outside the signal's rule.
    """
    wire = message.WhichOneof(oneof)  # from_wire's, inlined: every written value runs this
    if wire is None:
        return NOT_AVAILABLE
    raw = getattr(message, wire)
    if type(raw) is float and signal is not None:  # most writes: float or double
        kind = _FLOAT_KIND.get(signal.datatype)
        if kind is not None:  # a float or double signal: the number in its width
            problem = check_value(signal, raw)
            if problem is not None:
                raise InvalidValueError(key, problem)
            return encode(raw, kind=kind)
    value: Data = list(raw.values) if wire.endswith("_array") else raw
    if signal is None:
        try:
            return encode(value, kind=_KIND_OF_WIRE[wire])
        except ValueEncodingError as e:
            raise InvalidValueError(key, str(e)) from e
    if (wire == "float" or wire == "double") and signal.datatype in INT_RANGES:
        raise InvalidValueError(key, f"value {value!r} ({wire}) is not a {signal.datatype}")
    problem = check_value(signal, value)
    if problem is not None:
        raise InvalidValueError(key, problem)
    try:
        return encode(value, datatype=signal.datatype)
    except ValueEncodingError as e:
        raise InvalidValueError(key, str(e)) from e


def set_wire(message: Message, data: bytes | None, signal: Signal | None) -> bool:
    """Put the stored ``data`` into a KUKSA Datapoint (v1) or Value (v2).

    Returns whether the datapoint gets the write's timestamp: True for a value
    put, and for a failure (``message`` untouched: a datapoint with a
    timestamp and no value is KUKSA's failed signal); False (``message``
    untouched) for no value yet or bytes that are not a ``vehicle.value.v1``
    value (an opaque key written by another encoding).
    """
    if data is None:
        return False
    try:
        value, kind = decode_kind(data)
    except ValueEncodingError:
        return False
    if isinstance(value, Failure):
        return True
    field = value_field(None if signal is None else signal.datatype, kind)
    if type(value) is float and (field == "float" or field == "double"):
        setattr(message, field, value)  # most values: a number, where _put ends too
        return True
    return _put(message, field, value)


@functools.cache  # (datatype, kind) pairs: a few dozen; every delivered value asks
def value_field(datatype: str | None, kind: str) -> str:
    """The wire field a stored value of ``kind`` is read in, for a key of ``datatype``
    (None: an opaque key, read in the kind it was written in)."""
    if datatype is not None and kind_of_datatype(datatype) is not None:
        field = _wire_field(datatype)
        if field is not None:
            return field
    return _WIRE_OF_KIND[kind][0]


def _put(message: Message, field: str, value: Data) -> bool:
    try:
        if field.endswith("_array"):
            if not isinstance(value, list):
                return False
            if field in ("float_array", "double_array"):
                value = [float(v) for v in value]
            getattr(message, field).values.extend(value)
        else:
            if isinstance(value, list):
                return False
            if field in ("float", "double"):
                value = float(value)
            setattr(message, field, value)
    except (TypeError, ValueError):
        return False  # a stored value that does not fit its catalog type (written before)
    return True


# -- metadata ---------------------------------------------------------------------


def _limits(signal: Signal) -> tuple[Any, Any, list[Any]]:
    """min, max and allowed values of a signal, converted to its element type."""
    scalar = element_type(signal.datatype)
    convert: Any = (
        float if scalar in ("float", "double") else (int if scalar in INT_RANGES else None)
    )

    def conv(v: Any) -> Any:
        if convert is None or v is None:
            return v
        try:
            return convert(v)
        except (TypeError, ValueError):
            return None

    allowed = [conv(a) for a in signal.allowed]
    return conv(signal.min), conv(signal.max), [a for a in allowed if a is not None]


def metadata_v2(name: str, key_id: int, signal: Signal | None, data: bytes | None) -> t2.Metadata:
    """The v2 Metadata of a key."""
    md = t2.Metadata(path=name, id=key_id)
    datatype = datatype_of(signal, data)
    if datatype is not None:
        md.data_type = DATATYPE_TO_PB.get(datatype, t2.DATA_TYPE_UNSPECIFIED)  # type: ignore[assignment]
    if signal is None:
        return md
    md.entry_type = ENTRY_TYPE_TO_PB.get(signal.type, t2.ENTRY_TYPE_UNSPECIFIED)  # type: ignore[assignment]
    md.description = signal.description
    md.comment = signal.comment
    md.deprecation = signal.deprecation
    md.unit = signal.unit or ""
    scalar = _wire_field(element_type(signal.datatype))
    if scalar is None:
        return md
    lo, hi, allowed = _limits(signal)
    if lo is not None:
        _put(md.min, scalar, lo)
    if hi is not None:
        _put(md.max, scalar, hi)
    if allowed:
        _put(md.allowed_values, f"{scalar}_array", allowed)
    return md


def metadata_v1(signal: Signal | None, data: bytes | None) -> t1.Metadata:
    """The v1 Metadata of a key."""
    md = t1.Metadata()
    datatype = datatype_of(signal, data)
    if datatype is not None:
        md.data_type = DATATYPE_TO_PB.get(datatype, t1.DATA_TYPE_UNSPECIFIED)  # type: ignore[assignment]
    if signal is None:
        return md
    md.entry_type = ENTRY_TYPE_TO_PB.get(signal.type, t1.ENTRY_TYPE_UNSPECIFIED)  # type: ignore[assignment]
    if signal.description:
        md.description = signal.description
    if signal.comment:
        md.comment = signal.comment
    if signal.deprecation:
        md.deprecation = signal.deprecation
    if signal.unit:
        md.unit = signal.unit
    if signal.type in ("actuator", "sensor", "attribute"):
        getattr(md, signal.type).SetInParent()
    lo, hi, allowed = _limits(signal)
    scalar = element_type(signal.datatype)
    restriction: Any = None
    if scalar in INT_RANGES:
        restriction = (
            md.value_restriction.unsigned if scalar.startswith("u") else md.value_restriction.signed
        )
    elif scalar in ("float", "double"):
        restriction = md.value_restriction.floating_point
    elif scalar == "string" and allowed:
        md.value_restriction.string.allowed_values.extend(str(a) for a in allowed)
    if restriction is not None and (lo is not None or hi is not None or allowed):
        restriction.SetInParent()
        if lo is not None:
            restriction.min = lo
        if hi is not None:
            restriction.max = hi
        restriction.allowed_values.extend(allowed)
    return md


def signal_name(signal_id: Message, name_of: Any) -> str:
    """The key name a v2 SignalID names (``name_of``: the store's id -> name).

    Raises:
        InvalidRequestError: neither a path nor an id.
        UnknownKeyError: an id no key has.
    """
    which = signal_id.WhichOneof("signal")
    if which == "path":
        path: str = signal_id.path  # type: ignore[attr-defined]
        return path
    if which == "id":
        key_id: int = signal_id.id  # type: ignore[attr-defined]
        name = name_of(key_id) if key_id > 0 else None
        if name is None:
            raise UnknownKeyError(key_id)
        return str(name)
    raise InvalidRequestError("signal_id", "give the signal's path or its id")


# -- v1 errors ---------------------------------------------------------------------

_HTTP_OF_STATUS: Final[dict[Any, tuple[int, str]]] = {}


def v1_error(error: BaseException) -> t1.Error:
    """A v1 ``Error`` (HTTP-style code) for a domain error, through the project's one table."""
    import grpc
    from vehicle_middleware.server.rpc.status import status_for

    if not _HTTP_OF_STATUS:
        _HTTP_OF_STATUS.update(
            {
                grpc.StatusCode.INVALID_ARGUMENT: (400, "bad_request"),
                grpc.StatusCode.UNAUTHENTICATED: (401, "unauthorized"),
                grpc.StatusCode.PERMISSION_DENIED: (403, "forbidden"),
                grpc.StatusCode.NOT_FOUND: (404, "not_found"),
                grpc.StatusCode.ALREADY_EXISTS: (409, "conflict"),
                grpc.StatusCode.ABORTED: (409, "conflict"),
                grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "too_many_requests"),
                grpc.StatusCode.UNAVAILABLE: (503, "service_unavailable"),
            }
        )
    code, message = status_for(error)
    http, reason = _HTTP_OF_STATUS.get(code, (500, "internal_error"))
    return t1.Error(code=http, reason=reason, message=message)


_V2_CODE_OF_STATUS: Final[dict[str, int]] = {
    "INVALID_ARGUMENT": t2.ERROR_CODE_INVALID_ARGUMENT,
    "NOT_FOUND": t2.ERROR_CODE_NOT_FOUND,
    "PERMISSION_DENIED": t2.ERROR_CODE_PERMISSION_DENIED,
    "UNAUTHENTICATED": t2.ERROR_CODE_PERMISSION_DENIED,
}


def v2_error(error: BaseException) -> t2.Error:
    """A v2 per-signal ``Error`` for a domain error, through the project's one table."""
    from vehicle_middleware.server.rpc.status import status_for

    code, message = status_for(error)
    return t2.Error(
        code=_V2_CODE_OF_STATUS.get(code.name, t2.ERROR_CODE_INVALID_ARGUMENT),  # type: ignore[arg-type]
        message=message,
    )


def v2_value_of_v1(point: t1.Datapoint) -> t2.Value:
    """The v2 Value of a v1 Datapoint's value: the two share field numbers and types."""
    value = t1.Datapoint()
    value.CopyFrom(point)
    value.ClearField("timestamp")
    return t2.Value.FromString(value.SerializeToString())


def actuation_request(
    forward: Forward, signal_of: Callable[[str], Signal | None]
) -> v2.OpenProviderStreamResponse:
    """The ``BatchActuateStreamRequest`` that asks a KUKSA provider for ``forward``'s targets.

    Each value is sent in the wire type of the actuator's datatype (or of the
    kind stored, for an opaque key), as a read would return it.
    """
    message = v2.OpenProviderStreamResponse()
    requests = message.batch_actuate_stream_request.actuate_requests
    for t in forward.targets:
        request = requests.add()
        request.signal_id.id = t.key_id
        set_wire(request.value, t.data, signal_of(t.name))
    return message


def refusal(error: t2.Error | None) -> str | None:
    """A KUKSA provider's answer as the actuation core takes it: None (done) or the reason."""
    if error is None or error.code in (t2.ERROR_CODE_OK, t2.ERROR_CODE_UNSPECIFIED):
        return None
    return error.message or str(error.code)


MAX_DURATION_MS: Final = 86_400_000
"""The longest ``Filter.duration_ms`` a subscription may ask: 24 hours."""


def subscribe_filter(
    request: v2.SubscribeRequest | v2.SubscribeByIdRequest,
) -> tuple[Filter | None, float | None]:
    """A v2 subscription's filter: the ESS filter of ``min_sample_interval`` (None
    without one) and how long the call lasts in seconds (``duration_ms``; None: until
    the client ends it).

    Raises:
        InvalidRequestError: a present ``min_sample_interval`` of 0 ms or above the
            longest interval, or ``duration_ms`` above :data:`MAX_DURATION_MS`.
    """
    if not request.HasField("filter"):
        return None, None
    pb = request.filter
    flt: Filter | None = None
    if pb.HasField("min_sample_interval"):
        interval = pb.min_sample_interval.interval_ms
        try:
            flt = Filter.of_ms(min_interval_ms=interval)
        except InvalidFilterError as e:
            raise InvalidRequestError("filter.min_sample_interval.interval_ms", e.reason) from e
    if pb.duration_ms > MAX_DURATION_MS:
        raise InvalidRequestError(
            "filter.duration_ms",
            f"{pb.duration_ms} ms is above the allowed {MAX_DURATION_MS} ms (24 h); "
            "0 lasts until the client ends the call",
        )
    return flt, pb.duration_ms / 1000 if pb.duration_ms else None
