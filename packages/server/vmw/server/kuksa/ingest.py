"""A KUKSA v2 provider's publish of floats, read from its bytes.

A provider on ``OpenProviderStream`` sends most of its values as
``PublishValuesRequest``s of float or double signals, each with a timestamp
(``make bench-e2e``'s KUKSA provider sends 84 a message, one timestamp for all).
Decoded by protobuf, each of those values costs a ``Datapoint``, a ``Value``
and a ``Timestamp`` object and a dozen attribute reads from Python: about
1.8 us a value, where the project's own ``Publish`` costs 0.5.

On the wire, such a request is a few nested length-delimited fields, and a
float's value is a tag and the number's 4 (``float``) or 8 (``double``)
little-endian bytes: how the V-Store keeps a float too
(:data:`vmw.contract.values.FLOAT32_TAG`, :data:`~vmw.contract.values.DOUBLE_TAG`).
So :func:`parse` reads the request from its bytes, and :class:`FloatRows`
turns it into the store's rows with the stored value spliced from the wire's.

Only what needs no judgement takes this way: :func:`parse` returns None for
any other request or shape (another action, a value of another type, a field
twice, an unknown field, a bad timestamp, bytes that do not decode), and
:meth:`FloatRows.rows` returns None where a signal would be refused or needs
its full rules (an unknown key, a value outside the range
:func:`vmw.vss.float_bounds` gives, a ``double`` written to a ``float``
signal). The servicer then decodes the request with protobuf and writes it as
before (:mod:`vmw.server.kuksa.v2`): one definition of every refusal. Tests
hold the two ways to the same rows, byte for byte, in both builds.

Compiled by mypyc (``VMW_MYPYC=1``) the two cost about 0.5 us a value (a
one-off script, 84 floats with one timestamp a message; 1.85 through protobuf
and the general code). As Python they cost 2.9, more than protobuf's C
decoder: the servicer takes this way only where they are compiled
(:data:`COMPILED`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, TypeAlias

from vmw.contract.values import DOUBLE_TAG, FLOAT32_TAG
from vmw.server.kuksa.convert import MAX_TIME_NS
from vmw.vss import Signal, float_bounds
from vmw.vstore import UpdateRow

__all__ = ["COMPILED", "FloatRows", "Point", "Published", "parse"]

COMPILED: Final = not __file__.endswith(".py")
"""Whether this module runs compiled (then the servicer reads publishes with it)."""

_NS_PER_S: Final = 1_000_000_000
_INT32_MAX: Final = 0x7FFF_FFFF
_UINT32_MAX: Final = 0xFFFF_FFFF
_MAX_SECONDS: Final = MAX_TIME_NS // _NS_PER_S  # 18,446,744,073: 2554-07-21
_MAX_NANOS: Final = MAX_TIME_NS % _NS_PER_S
_F32: Final = struct.Struct("<f")
_F64: Final = struct.Struct("<d")
_FLOAT32_PREFIX: Final = bytes((FLOAT32_TAG,))
_DOUBLE_PREFIX: Final = bytes((DOUBLE_TAG,))
# Tags, as one-byte varints (field number << 3 | wire type; 0 varint, 1 fixed64,
# 2 length-delimited, 5 fixed32).
_PUBLISH: Final = 0x12  # OpenProviderStreamRequest.publish_values_request (2)
_REQUEST_ID: Final = 0x08  # PublishValuesRequest.request_id (1)
_DATA_POINT: Final = 0x12  # PublishValuesRequest.data_points (2): a map entry
_KEY: Final = 0x08  # the entry's key (1): the signal's id
_POINT: Final = 0x12  # the entry's value (2): a Datapoint
_TIMESTAMP: Final = 0x0A  # Datapoint.timestamp (1)
_VALUE: Final = 0x12  # Datapoint.value (2)
_SECONDS: Final = 0x08  # Timestamp.seconds (1)
_NANOS: Final = 0x10  # Timestamp.nanos (2)
# Value.float (17, fixed32) and Value.double (18, fixed64): two-byte tags, the same
# second byte (fields 16 to 31).
_FLOAT: Final = 0x8D
_DOUBLE: Final = 0x91
_FIELD_16_TO_31: Final = 0x01

FLOAT: Final = "float"
DOUBLE: Final = "double"

Point: TypeAlias = tuple[bytes, str, float, int]
"""A signal's value as read: the bytes to store, the VSS datatype of the wire's
number (``float`` or ``double``), the number, and the time in ns (0: none given)."""
_Rule: TypeAlias = tuple[Signal | None, str, float, float]


class Published:
    """A ``PublishValuesRequest`` of floats, as :func:`parse` read it."""

    raw: bytes
    """The ``OpenProviderStreamRequest``'s bytes (for protobuf, where this way stops)."""
    request_id: int
    points: dict[int, Point]
    """Per signal id, in the order of the wire (the last of an id wins, as in
    protobuf's map)."""

    def __init__(self, raw: bytes, request_id: int, points: dict[int, Point]) -> None:
        self.raw = raw
        self.request_id = request_id
        self.points = points


def _varint(raw: bytes, i: int, end: int) -> tuple[int, int]:
    """The varint at ``raw[i]`` and the index after it; -1 if it runs past ``end``
    or over ten bytes."""
    shift = 0
    n = 0
    while i < end and shift < 70:
        b = raw[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7
    return -1, i


def parse(raw: bytes) -> Published | None:
    """``raw`` (an ``OpenProviderStreamRequest``) read as a publish of floats, or None
    where it is anything else, or anything this reader does not judge."""
    end = len(raw)
    if end < 2 or raw[0] != _PUBLISH:
        return None
    length, i = _varint(raw, 1, end)
    if length < 0 or i + length != end:  # the one field of the message, or another action too
        return None
    request_id = 0
    reader = _Reader(raw)
    while i < end:
        tag = raw[i]
        i += 1
        if tag == _REQUEST_ID:
            request_id, i = _varint(raw, i, end)
            if not 0 <= request_id <= _UINT32_MAX:
                return None
        elif tag == _DATA_POINT:
            length, i = _varint(raw, i, end)
            stop = i + length
            if length < 0 or stop > end or not reader.entry(i, stop):
                return None
            i = stop
        else:
            return None
    return Published(raw, request_id, reader.points)


class _Reader:
    """The points of one request as they are read, and its last timestamp (its
    bytes' place and its time): the signals of one publish mostly share one."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.points: dict[int, Point] = {}
        self.time_at = 0
        self.time_end = 0
        self.time_ns = 0

    def entry(self, i: int, end: int) -> bool:
        """Read one map entry (an id and its ``Datapoint``) into ``points``."""
        raw = self.raw
        key = 0
        point_at = point_end = -1
        while i < end:
            tag = raw[i]
            i += 1
            if tag == _KEY:
                key, i = _varint(raw, i, end)
                if not 0 <= key <= _INT32_MAX:  # a negative id: protobuf's way says so
                    return False
            elif tag == _POINT and point_at < 0:
                length, i = _varint(raw, i, end)
                point_at, point_end = i, i + length
                if length < 0 or point_end > end:
                    return False
                i = point_end
            else:
                return False
        if point_at < 0:
            return False
        # The Datapoint: a timestamp (optional) and a value, each once.
        i = point_at
        value_at = value_end = -1
        time_ns = 0
        timed = False
        while i < point_end:
            tag = raw[i]
            i += 1
            length, i = _varint(raw, i, point_end)
            stop = i + length
            if length < 0 or stop > point_end:
                return False
            if tag == _VALUE and value_at < 0:
                value_at, value_end = i, stop
            elif tag == _TIMESTAMP and not timed:
                time_ns = self.timestamp(i, stop)
                if time_ns < 0:
                    return False
                timed = True
            else:
                return False
            i = stop
        # The value: a float's tag and 4 bytes, or a double's and 8.
        size = value_end - value_at
        if size < 6 or raw[value_at + 1] != _FIELD_16_TO_31:
            return False
        tag = raw[value_at]
        at = value_at + 2
        if size == 6 and tag == _FLOAT:
            self.points[key] = (
                _FLOAT32_PREFIX + raw[at:value_end],
                FLOAT,
                _F32.unpack_from(raw, at)[0],
                time_ns,
            )
        elif size == 10 and tag == _DOUBLE:
            self.points[key] = (
                _DOUBLE_PREFIX + raw[at:value_end],
                DOUBLE,
                _F64.unpack_from(raw, at)[0],
                time_ns,
            )
        else:
            return False
        return True

    def timestamp(self, i: int, end: int) -> int:
        """The time of the ``Timestamp`` at ``raw[i:end]``: the last one's where its
        bytes are the same (compared in place), else :func:`_time_ns`'s."""
        raw, at, size = self.raw, self.time_at, end - i
        if size == self.time_end - at:
            j = 0
            while j < size and raw[i + j] == raw[at + j]:
                j += 1
            if j == size:
                return self.time_ns
        time_ns = _time_ns(raw, i, end)
        self.time_at, self.time_end, self.time_ns = i, end, time_ns
        return time_ns


def _time_ns(raw: bytes, i: int, end: int) -> int:
    """A ``Timestamp``'s time in ns (0: zero or unset), or -1 where protobuf's way
    must judge it (negative, ``nanos`` out of range, past a uint64 of ns, a field
    twice)."""
    seconds = nanos = -1
    while i < end:
        tag = raw[i]
        i += 1
        if tag == _SECONDS and seconds < 0:
            seconds, i = _varint(raw, i, end)
            if seconds < 0 or seconds > _MAX_SECONDS:  # (negative: ten bytes, above)
                return -1
        elif tag == _NANOS and nanos < 0:
            nanos, i = _varint(raw, i, end)
            if nanos < 0 or nanos >= _NS_PER_S:
                return -1
        else:
            return -1
    # Compared as small ints (mypyc keeps them unboxed): a uint64's bound only in
    # its last second.
    if seconds < 0:
        seconds = 0
    if nanos < 0:
        nanos = 0
    if seconds == _MAX_SECONDS and nanos > _MAX_NANOS:
        return -1
    return seconds * _NS_PER_S + nanos


class FloatRows:
    """The store's rows of a :class:`Published`, where every signal takes its value
    at a glance: a known key, and a number within :func:`vmw.vss.float_bounds` of
    its signal (an opaque key: any number but a NaN, stored in the wire's kind)."""

    def __init__(
        self, name_of: Callable[[int], str | None], signal_of: Callable[[str], Signal | None]
    ) -> None:
        self._name_of = name_of
        self._signal_of = signal_of
        # Per key name: its signal (as last seen), the datatype a number must come in
        # ("": any, an opaque key) and the bounds it must be within.
        self._rules: dict[str, _Rule] = {}

    def rows(self, published: Published) -> list[UpdateRow] | None:
        """The rows to write, or None where a signal needs protobuf's way."""
        name_of, signal_of, rules = self._name_of, self._signal_of, self._rules
        out: list[UpdateRow] = []
        for key_id, (data, datatype, number, time_ns) in published.points.items():
            name = name_of(key_id) if key_id > 0 else None
            if name is None:
                return None
            signal = signal_of(name)
            rule = rules.get(name)
            if rule is None or rule[0] is not signal:
                rule = self._rule(name, signal)
                if rule is None:
                    return None
            wanted = rule[1]
            if wanted == "":  # an opaque key: stored in the wire's kind, NaN aside
                if number != number:
                    return None
            elif wanted != datatype or not rule[2] <= number <= rule[3]:
                return None
            out.append((key_id, data, None, time_ns or None))
        return out

    def _rule(self, name: str, signal: Signal | None) -> _Rule | None:
        if signal is None:
            rule: _Rule = (None, "", 0.0, 0.0)
        else:
            bounds = float_bounds(signal)
            if bounds is None:
                return None
            rule = (signal, signal.datatype, bounds[0], bounds[1])
        if len(self._rules) >= 65536:  # keys come and go: bounded by a fresh start
            self._rules.clear()
        self._rules[name] = rule
        return rule
