"""A KUKSA v2 provider's publish of floats, read without a message per value.

The fast implementation of :class:`vehicle_middleware.server.codecs.PublishReader` (its
reference twin: :mod:`vehicle_middleware.server.kuksa.ingest_reference`), compiled by mypyc
in the build with ``VMW_MYPYC=1``.

A provider on ``OpenProviderStream`` sends most of its values as
``PublishValuesRequest``s of float or double signals, each with a timestamp
(``make bench-e2e``'s KUKSA provider sends 84 a message, one timestamp for all).
Decoded as ``PublishValuesRequest``, each value costs a ``Datapoint``, a
``Value`` and a ``Timestamp`` object and a dozen attribute reads from Python.

So the request is decoded by protobuf under a second schema for the same
bytes (:data:`PUBLISH_BYTES`), in which the map's values are ``bytes``: a
``Datapoint``'s own bytes, one object per value and no attribute to read.
Those bytes are nearly always a timestamp's field, then the value's: a tag
and the number's 4 (``float``) or 8 (``double``) little-endian bytes, which
is how the V-Store keeps a float too (:data:`vehicle_middleware.contract.values.FLOAT32_TAG`,
:data:`~vehicle_middleware.contract.values.DOUBLE_TAG`). :class:`FloatRows` checks that
layout, splices the stored value from it, and reads a timestamp once per
distinct bytes (the values of one publish share it).

Only what needs no judgement goes this way. :func:`parse` returns None for
any other action, bytes that do not decode, and a request not encoded as
protobuf encodes it (a field of a map entry twice, an id twice, an unknown
field). :meth:`FloatRows.rows` returns None where a ``Datapoint``'s bytes are
anything but a timestamp's field (of a time protobuf's way would take) and a
float's or double's value field, and where a signal would be refused or needs
its full rules (an id of no key, a signal :func:`vehicle_middleware.vss.float_bounds`
gives no range, a ``double`` written to a ``float`` signal). Bytes that do
not decode as a ``Datapoint`` are among the first. The servicer then decodes
the request as ``PublishValuesRequest`` and writes it through the general code
(:mod:`vehicle_middleware.server.kuksa.v2`): one definition of every refusal. A typed key's
range is not judged here but by the V-Store's value check of its signal
(:func:`vehicle_middleware.server.signals.value_check`, which every catalog signal has from
the start): the servicer writes the rows with
:meth:`~vehicle_middleware.vstore.VStore.write_many`, which refuses a batch with a value out
of range as a whole, and then takes the general code's way too. Tests hold
the two ways (the reader and the value check; the general code) to the same
rows, byte for byte, in both builds, and the reader to never taking bytes
that protobuf refuses.

``python -m bench.kuksa_ingest`` times both ways on a publish of 84 floats
with one timestamp, beside protobuf's decode of the same request alone.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp
from vehicle_middleware.contract.values import DOUBLE_TAG, FLOAT32_TAG
from vehicle_middleware.server.errors import InvalidRequestError
from vehicle_middleware.server.kuksa.convert import time_ns_of
from vehicle_middleware.vss import Signal, float_bounds
from vehicle_middleware.vstore import UpdateRow

__all__ = ["PUBLISH_BYTES", "FloatRows", "Published", "parse"]


def _schema() -> Any:
    """``OpenProviderStreamRequest`` as far as a publish goes, a map entry's value
    left as its bytes: ``{publish_values_request (2): {request_id (1),
    data_points (2): map<int32, bytes>}}``."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="vehicle_middleware/server/kuksa/ingest.proto",
        package="vehicle_middleware.server.kuksa.ingest",
        syntax="proto3",
    )
    publish = proto.message_type.add(name="PublishBytes")
    publish.field.add(name="request_id", number=1, type=f.TYPE_UINT32, label=f.LABEL_OPTIONAL)
    entry = publish.nested_type.add(name="DataPointsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=f.TYPE_BYTES, label=f.LABEL_OPTIONAL)
    publish.field.add(
        name="data_points",
        number=2,
        type=f.TYPE_MESSAGE,
        label=f.LABEL_REPEATED,
        type_name=".vehicle_middleware.server.kuksa.ingest.PublishBytes.DataPointsEntry",
    )
    request = proto.message_type.add(name="ProviderBytes")
    request.field.add(
        name="publish_values_request",
        number=2,
        type=f.TYPE_MESSAGE,
        label=f.LABEL_OPTIONAL,
        type_name=".vehicle_middleware.server.kuksa.ingest.PublishBytes",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("vehicle_middleware.server.kuksa.ingest.ProviderBytes")
    )


PUBLISH_BYTES: Final = _schema()
"""The message class of that second schema."""

_PUBLISH: Final = b"\x12"  # OpenProviderStreamRequest.publish_values_request (2), length-delimited
_TIMESTAMP: Final = 0x0A  # Datapoint.timestamp (1), length-delimited
# A Datapoint's value field (2) of 6 bytes: Value.float (17, fixed32) and its 4 bytes;
# of 10 bytes: Value.double (18, fixed64) and its 8 bytes.
_FLOAT_VALUE: Final = b"\x12\x06\x8d\x01"
_DOUBLE_VALUE: Final = b"\x12\x0a\x91\x01"
_F32: Final = struct.Struct("<f")
_F64: Final = struct.Struct("<d")
_FLOAT32_PREFIX: Final = bytes((FLOAT32_TAG,))
_DOUBLE_PREFIX: Final = bytes((DOUBLE_TAG,))
_FLOAT: Final = "float"
_DOUBLE: Final = "double"


class Published:
    """A publish as :func:`parse` read it: its request's bytes (for protobuf's way,
    where this one stops), its id, and each signal id's ``Datapoint`` bytes."""

    def __init__(self, raw: bytes, request_id: int, points: Mapping[int, bytes]) -> None:
        self.raw = raw
        self.request_id = request_id
        self.points = points


def parse(raw: bytes) -> Published | None:
    """``raw`` (an ``OpenProviderStreamRequest``) read as a publish, or None where it
    is another action, bytes that do not decode, or not encoded as protobuf
    encodes a publish."""
    if raw[:1] != _PUBLISH:  # another action, at a glance
        return None
    try:
        message = PUBLISH_BYTES.FromString(raw)
    except DecodeError:
        return None
    # Its bytes as protobuf writes them: the publish once and nothing else (another
    # action beside it is unknown here, and would be the oneof's last field), each
    # map entry once, with its key and value once. Any other encoding may mean what
    # a Datapoint's bytes alone do not say (a value field twice in an entry is two
    # Datapoints merged), and is protobuf's to read. upb keeps an entry with an
    # unknown field out of the map, among the message's unknown fields, where it
    # still counts: dropped first. What re-encodes longer than it came (an id
    # that is negative, or not written: 0; no Datapoint) FloatRows refuses.
    message.DiscardUnknownFields()
    if message.ByteSize() != len(raw):
        return None
    publish = message.publish_values_request
    return Published(raw, publish.request_id, publish.data_points)


class FloatRows:
    """The store's rows of a :class:`Published`, where every value is a float or
    double laid out as protobuf writes it and its key takes that kind at a
    glance: a known key of a ``float`` or ``double`` signal that
    :func:`vehicle_middleware.vss.float_bounds` gives a range, its number in the signal's own
    width (an opaque key: any number but a NaN, stored in the wire's kind).
    Whether the number is within the range is the V-Store's value check's to
    say, as it is for every other write path: the rows go to
    :meth:`~vehicle_middleware.vstore.VStore.write_many`, which refuses them as a whole when
    one is not, nothing written (one judge of the range).

    ``name_of`` gives a key id's name and ``signal_of`` a name's signal; each
    id's rule is kept, and ``generation`` must change whenever an id may name
    another key or a name another signal: the server passes the V-Store's
    :attr:`~vehicle_middleware.vstore.VStore.removals` (a removed key's id may be reused; the
    catalogs are read once, at start). The rule is looked up by id, not by
    the name and the signal each time. The values of one publish mostly share
    their bytes before the number (a timestamp's field and the value field's
    head): the reader keeps the last value's, and a value with the same needs
    only its number spliced.
    """

    def __init__(
        self,
        name_of: Callable[[int], str | None],
        signal_of: Callable[[str], Signal | None],
        generation: Callable[[], int],
    ) -> None:
        self._name_of = name_of
        self._signal_of = signal_of
        self._generation = generation
        self._seen = generation()
        # Per key id: the datatype a number must come in ("": any, an opaque key).
        self._rules: dict[int, str] = {}

    def parse(self, raw: bytes) -> Published | None:
        """``raw`` read as a publish: :func:`parse`."""
        return parse(raw)

    def rows(self, published: Published) -> list[UpdateRow] | None:
        """The rows to write, or None where a value needs protobuf's way."""
        rules = self._rules
        generation = self._generation()
        if generation != self._seen:
            rules.clear()
            self._seen = generation
        out: list[UpdateRow] = []
        # The last value's bytes up to its number (its timestamp's field and value
        # field's head), where the number starts from the end, and what it gave:
        # the values of one publish mostly share them, and then only their
        # numbers differ.
        head: bytes | None = None
        cut, prefix, datatype, when = 0, b"", "", None
        points = published.points
        for key_id in points:  # not items(): protobuf's view of a map is Python code
            point = points[key_id]
            if point[:cut] != head:
                size = len(point)
                if size >= 8 and point[size - 8 : size - 4] == _FLOAT_VALUE:
                    datatype, cut, prefix = _FLOAT, -4, _FLOAT32_PREFIX
                elif size >= 12 and point[size - 12 : size - 8] == _DOUBLE_VALUE:
                    datatype, cut, prefix = _DOUBLE, -8, _DOUBLE_PREFIX
                else:
                    return None
                # Before the value field, a timestamp's field or nothing.
                split = size + cut - 4
                if split:
                    time_ns = _time_ns(point[:split])
                    if time_ns < 0:
                        return None
                    when = time_ns or None
                else:
                    when = None
                head = point[:cut]
            data = prefix + point[cut:]
            try:
                wanted = rules[key_id]
            except KeyError:
                rule = self._rule(key_id)
                if rule is None:
                    return None
                wanted = rule
            # An opaque key ("") takes either kind, stored as it came, but a NaN.
            if wanted != datatype and (wanted or _is_nan(data)):
                return None
            out.append((key_id, data, None, when))
        return out

    def _rule(self, key_id: int) -> str | None:
        """The datatype a key's numbers must come in ("" for any: an opaque key),
        kept; None where there is no key or its signal needs its full rules."""
        name = self._name_of(key_id) if key_id > 0 else None
        if name is None:
            return None
        signal = self._signal_of(name)
        if signal is None:
            rule = ""
        elif float_bounds(signal) is None:
            return None
        else:
            rule = signal.datatype
        if len(self._rules) >= 65536:  # many keys: bounded by a fresh start
            self._rules.clear()
        self._rules[key_id] = rule
        return rule


def _is_nan(data: bytes) -> bool:
    """Whether a stored float or double (its tag, then the number) is a NaN."""
    number: float = (_F32 if len(data) == 5 else _F64).unpack_from(data, 1)[0]
    return number != number


def _time_ns(field: bytes) -> int:
    """The time of a ``Datapoint``'s timestamp ``field`` (its tag, length and
    ``Timestamp``) in ns, 0 for none; -1 where it is not one field, or protobuf's
    way would refuse it (see :func:`vehicle_middleware.server.kuksa.convert.time_ns_of`)."""
    size = len(field)
    if size < 2 or field[0] != _TIMESTAMP or field[1] >= 0x80 or field[1] != size - 2:
        return -1  # one field of one byte's length (a Timestamp is at most 22 bytes)
    try:
        stamp = Timestamp.FromString(field[2:])
        return time_ns_of(stamp.seconds, stamp.nanos, "data_point")
    except (DecodeError, InvalidRequestError):
        return -1
