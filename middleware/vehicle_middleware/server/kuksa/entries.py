"""The bytes of a KUKSA v2 subscription's responses, written without a message per entry.

The fast implementation of :class:`vehicle_middleware.server.codecs.EntryEncoder` (its
reference twin: :class:`vehicle_middleware.server.kuksa.entries_reference.EntryMessages`),
compiled by mypyc in the build with ``VMW_MYPYC=1``.

``SubscribeResponse`` and ``SubscribeByIdResponse`` are one map field
(``entries``, field 1) of a path or an id to a ``Datapoint``. On the wire a
map is a repeated field of entry messages (key: field 1, value: field 2), and
a message's bytes are its fields' bytes one after the other; so a response is
its entries' bytes, each encoded on its own, and a one-entry response encoded
by protobuf is a valid piece of a larger one.

Most values a vehicle delivers are floats, stored as a tag and the number's
4 or 8 little-endian bytes (:data:`vehicle_middleware.contract.values.FLOAT32_TAG`,
:data:`~vehicle_middleware.contract.values.DOUBLE_TAG`), which is how protobuf writes a
``float`` or ``double`` field too. Such an entry is spliced from pieces that
go to the response's one join: the entry's bytes before its ``Datapoint``
(the entry's field and length, the key's field, the ``Datapoint``'s length:
kept per key for the last length of its ``Datapoint``, which stays the same
while the time's bytes and the number's width do), the write's ``Timestamp``
(built once per distinct time: the signals of one publish share it), the
value field's head and the stored number. Every other entry (integers,
strings, arrays, no value yet, a value read in another type) is encoded by
protobuf through :func:`vehicle_middleware.server.kuksa.convert.set_wire`, as a one-entry
response.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from google.protobuf.message import Message
from vehicle_middleware.contract.values import DOUBLE_TAG, FLOAT32_TAG
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.kuksa.response_cuts import Update
from vehicle_middleware.server.wire import ONE_BYTE, short_heads, varint
from vehicle_middleware.vss import Signal

__all__ = ["Entries"]

_NS_PER_S: Final = 1_000_000_000
_ENTRY: Final = b"\x0a"  # a response's field 1 (entries), length-delimited
_TIMESTAMP: Final = b"\x0a"  # a Datapoint's field 1 (timestamp)
_ENTRY_HEADS: Final = short_heads(_ENTRY)
"""An entry's field and its length n, for n < 128."""
# A Datapoint's field 2 (value), 6 bytes long: a Value's field 17 (float, fixed32), then
# the 4 bytes; and 10 bytes long: field 18 (double, fixed64), then the 8 bytes.
_FLOAT_VALUE: Final = b"\x12\x06\x8d\x01"
_DOUBLE_VALUE: Final = b"\x12\x0a\x91\x01"


class _Key:
    """What a stream knows of one key: its field in an entry, its signal, the
    number field (``float``, ``double``) each stored float kind is read in, if its
    own, and its entries' bytes before the ``Datapoint`` for the last length of one."""

    __slots__ = ("double", "field", "float32", "head", "key", "point", "signal", "size")

    def __init__(self, key: str | int, signal: Signal | None) -> None:
        self.key = key
        self.signal = signal
        if isinstance(key, str):
            raw = key.encode()
            self.field = b"\x0a" + varint(len(raw)) + raw + b"\x12"  # key (1), then value (2)
        else:
            self.field = b"\x08" + varint(key) + b"\x12"  # an id: a positive int32
        self.size = len(self.field)
        # An entry's bytes up to its Datapoint's, for a Datapoint of ``point`` bytes
        # (its length: the same for every value of one width and timestamp).
        self.point = -1
        self.head = b""
        datatype = None if signal is None else signal.datatype
        # Spliced only where the stored number goes out in its own width.
        self.float32 = convert.value_field(datatype, "float32") == "float"
        self.double = convert.value_field(datatype, "float") == "double"


class Entries:
    """The entries of one subscription stream's responses, as bytes.

    ``response``: the message type (``SubscribeResponse`` or
    ``SubscribeByIdResponse``), for the entries protobuf encodes; ``by_name``:
    whether its map is keyed by path (else by id). ``name_of`` and ``signal_of``
    look a key up by id and its signal by name, once per key: an id cannot
    change its key under a subscription, since a removed key ends the
    subscriptions on it.
    """

    def __init__(
        self,
        response: type[Message],
        *,
        by_name: bool,
        name_of: Callable[[int], str | None],
        signal_of: Callable[[str], Signal | None],
    ) -> None:
        self._response = response
        self._by_name = by_name
        self._name_of = name_of
        self._signal_of = signal_of
        self._keys: dict[int, _Key] = {}

    def encode(self, batch: Iterable[Update]) -> bytes:
        """One response's bytes: an entry per update (each key at most once; a key
        removed since is left out)."""
        pieces: list[bytes] = []
        keys = self._keys
        last = _LAST
        time, timestamp = last.time, last.field
        for key_id, _, time_ns, data, _ in batch:
            key = keys.get(key_id)
            if key is None:
                name = self._name_of(key_id)
                if name is None:
                    continue  # removed since
                key = keys[key_id] = _Key(name if self._by_name else key_id, self._signal_of(name))
            # The head of the Datapoint's value field that the stored float's own bytes
            # (after its tag) complete, where it goes out in its own width; else
            # protobuf encodes the entry.
            if data is None:  # no value yet: neither value nor timestamp
                pieces.append(self._by_protobuf(key, None, time_ns))
                continue
            size = len(data)
            if size == 5 and key.float32 and data[0] == FLOAT32_TAG:
                value = _FLOAT_VALUE
            elif size == 9 and key.double and data[0] == DOUBLE_TAG:
                value = _DOUBLE_VALUE
            else:
                pieces.append(self._by_protobuf(key, data, time_ns))
                continue
            if time_ns != time:
                time, timestamp = time_ns, _timestamp(time_ns)
            # The entry's pieces go to one join: a key, a Datapoint of a timestamp and
            # the value field's head with the stored number after its tag.
            point = len(timestamp) + size + 3  # the head is 4 bytes, the tag 1
            if point == key.point:
                pieces += (key.head, timestamp, value, data[1:])
                continue
            entry = key.size + point + 1
            if entry < 128:  # every length one byte (a path up to about 100 bytes)
                key.point, key.head = point, _ENTRY_HEADS[entry] + key.field + ONE_BYTE[point]
                pieces += (key.head, timestamp, value, data[1:])
            else:
                body = timestamp + value + data[1:]
                body = key.field + varint(len(body)) + body
                pieces.append(_ENTRY + varint(len(body)) + body)
        last.time, last.field = time, timestamp
        return b"".join(pieces)

    def _by_protobuf(self, key: _Key, data: bytes | None, time_ns: int) -> bytes:
        response = self._response()
        point = response.entries[key.key]  # type: ignore[attr-defined]
        # No value (none yet, or bytes of another encoding): neither value nor timestamp.
        if convert.set_wire(point.value, data, key.signal):
            convert.set_timestamp(point.timestamp, time_ns)
        return response.SerializeToString()


class _Timestamp:
    """A write time and its ``timestamp`` field, as the last response built it."""

    __slots__ = ("field", "time")

    def __init__(self) -> None:
        self.time = -1
        self.field = b""


_LAST: Final = _Timestamp()
"""The last time every stream's responses built, shared: the subscribers of one key
get its writes at the same times, and would each build each time's field anew.
Only the event loop's thread encodes responses."""


def _timestamp(time_ns: int) -> bytes:
    """A Datapoint's ``timestamp`` field: seconds (1) and nanos (2), each left out when 0."""
    seconds, nanos = divmod(time_ns, _NS_PER_S)
    body = (b"\x08" + varint(seconds) if seconds else b"") + (
        b"\x10" + varint(nanos) if nanos else b""
    )
    return _TIMESTAMP + varint(len(body)) + body
