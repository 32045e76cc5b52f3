"""An app stream's ``EventBatch`` messages, put together as bytes without a message per event.

The fast implementation of :class:`vehicle_middleware.server.codecs.BatchEncoder` (its
reference twin: :class:`vehicle_middleware.server.rpc.batches_reference.EventMessages`),
compiled by mypyc in the build with ``VMW_MYPYC=1``.

An ``EventBatch`` is one repeated field (``events``, field 1) of ``Event``
messages, and a message's bytes are its fields' bytes one after the other: so
a batch is its events' bytes, each encoded on its own, and a one-event batch
encoded by protobuf is a valid piece of a larger one. Cutting a batch that
would exceed the message limit is cutting between two events' pieces.

Nearly every event is a ``DataUpdated`` (``Event`` field 2), and its bytes are
put together here from its fields: the key's (built once per key and
stream), the seq, the write's ``time_ns`` (built once per distinct time: the
updates of one publish share it) and the value. An event is seven pieces of
its batch's one join: its first four bytes and its value field's head come
from tables by length, and the lengths that add up to an event's are kept
with what they measure (the key's and seq's bytes per key, the time field's
per time), so the message's room is one subtraction. Every other event
(lifecycle, health) is encoded by protobuf through
:func:`vehicle_middleware.server.rpc.convert.event_batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from vehicle_middleware.ess import Event, RawEvent, data_rows, unpack_queue
from vehicle_middleware.server.rpc.convert import event_batch
from vehicle_middleware.server.wire import ONE_BYTE, short_heads, varint

__all__ = ["EventBytes"]

_EVENT: Final = b"\x0a"  # an EventBatch's field 1 (events), length-delimited
_DATA_UPDATED: Final = b"\x12"  # an Event's field 2 (data_updated), length-delimited
_TIME: Final = b"\x18"  # a DataUpdated's field 3 (time_ns), a varint
_DATA: Final = b"\x22"  # field 4 (data), length-delimited
_QUEUE: Final = b"\x28"  # field 5 (queue), a varint, left out for queue 0
_WRITES: Final = b"\x30"  # field 6 (writes), a varint, left out for 1 write
_CONTINUED: Final = tuple(bytes((n | 0x80,)) for n in range(128))
"""A varint's first byte where more follow: its low 7 bits and the continuation bit."""
_HEADS: Final = (b"",) * 4 + tuple(
    _EVENT + ONE_BYTE[n + 2] + _DATA_UPDATED + ONE_BYTE[n] for n in range(126)
)
"""An event's first four bytes where the event is n bytes in all (4 <= n < 130: its
``DataUpdated``'s body n - 4 bytes): the batch's field 1 and the ``Event``'s
length, the ``Event``'s field 2 and the body's."""
_DATA_HEADS: Final = short_heads(_DATA)
"""A ``DataUpdated``'s data field (4) and its length n, for n < 128."""


class EventBytes:
    """The messages of one app stream, as bytes: each drained batch as one
    ``EventBatch``, or as several where one would exceed the message limit.

    It keeps, per key id the stream has carried (as many as the app's
    subscriptions), the key's field and the rest of its last seq's varint, and
    the last write time's field.

    A seq of 128 or more is its low 7 bits (with the continuation bit) and then
    the varint of ``seq >> 7``, which changes once in 128 events of the key: the
    first byte comes from a table and the rest is kept, not computed per event.
    """

    __slots__ = ("_keys", "_time", "_time_field")

    def __init__(self) -> None:
        # key id -> (its field and the tag of seq, seq >> 7 as last seen, its varint,
        # and the bytes of an event of the key but its time and value: those with
        # the seq's first byte, the event's four heads and the value's two)
        self._keys: dict[int, tuple[bytes, int, bytes, int]] = {}
        self._time = -1
        self._time_field = b""

    def messages(self, events: Sequence[Event | RawEvent], max_bytes: int) -> list[bytes]:
        """``events`` in order, in messages of at most ``max_bytes`` each (an event
        bigger than that alone in its own: the settings keep the message limit
        above the value limit, so it does not happen). ``events`` as a drain hands
        them out: its lifecycle and health events first, then its data events,
        each a ``DataUpdated`` or the plain tuple of its fields (``drain_raw``)."""
        out: list[bytes] = []
        pieces: list[bytes] = []
        room = max_bytes  # what the message being put together can still take
        rows = data_rows(events)
        if len(rows) != len(events):  # the lifecycle and health events: protobuf's
            for e in events:
                if isinstance(e, tuple):
                    continue  # a data event: below
                pieces, room = _add(
                    out, pieces, room, max_bytes, event_batch((e,)).SerializeToString()
                )
        keys = self._keys
        time, time_field = self._time, self._time_field
        time_size = len(time_field)
        # The tables as locals: read for every event.
        one_byte, continued = ONE_BYTE, _CONTINUED
        heads, data_heads = _HEADS, _DATA_HEADS
        # The data events alone: no type test an event.
        # A row's last field is its queue, packed with its writes where it stands
        # for more than one (a filtered subscription's event): 0 only for queue 0
        # and one write, so the common branch below takes no other.
        for key, seq, time_ns, data, queue in rows:
            try:
                head, high, seq_rest, fixed = keys[key]
            except KeyError:  # key (1) and the tag of seq (2): an id is never 0
                head = b"\x08" + varint(key) + b"\x10"
                high, seq_rest, fixed = -1, b"", len(head) + 7
                keys[key] = (head, high, seq_rest, fixed)
            if seq < 128:  # a seq is never 0
                seq_first, seq_rest, fixed = one_byte[seq], b"", len(head) + 7
            else:
                seq_first = continued[seq & 0x7F]
                if seq >> 7 != high:
                    seq_rest = varint(seq >> 7)
                    fixed = len(head) + 7 + len(seq_rest)
                    keys[key] = (head, seq >> 7, seq_rest, fixed)
            if time_ns != time:  # 0 is left out, as protobuf leaves it out
                time = time_ns
                time_field = _TIME + varint(time_ns) if time_ns else b""
                time_size = len(time_field)
            if data is not None and not queue:
                size = len(data)
                length = fixed + time_size + size
                if length < 130:
                    # Most events: a value, queue 0 (left out), and every length
                    # below 128 (a byte each). The pieces go to one join: only
                    # their lengths are added up here.
                    room -= length
                    if room < 0 and pieces:
                        out.append(b"".join(pieces))
                        pieces, room = [], max_bytes - length
                    pieces += (
                        heads[length],
                        head,
                        seq_first,
                        seq_rest,
                        time_field,
                        data_heads[size],
                        data,
                    )
                    continue
            piece = _data_updated(head + seq_first + seq_rest + time_field, data, queue)
            pieces, room = _add(out, pieces, room, max_bytes, piece)
        self._time, self._time_field = time, time_field
        if pieces or not out:
            out.append(b"".join(pieces))
        return out


def _add(
    out: list[bytes], pieces: list[bytes], room: int, max_bytes: int, piece: bytes
) -> tuple[list[bytes], int]:
    """Add an event's ``piece`` to the message being put together (``pieces``, with
    ``room`` left), first ending that message in ``out`` where the piece does not
    fit; the message's pieces and room after it. (The common event does the same
    inline, with the lengths it has added up.)"""
    room -= len(piece)
    if room < 0 and pieces:
        out.append(b"".join(pieces))
        pieces, room = [], max_bytes - len(piece)
    pieces.append(piece)
    return pieces, room


def _data_updated(fields: bytes, data: bytes | None, packed: int) -> bytes:
    """An event's piece of a batch, from the bytes of its first fields (key, seq, time)
    and its row's packed queue and writes."""
    queue, writes = unpack_queue(packed)
    body = fields
    if data is not None:  # optional: present even when empty
        body += _DATA + varint(len(data)) + data
    if queue:
        body += _QUEUE + varint(queue)
    if writes > 1:
        body += _WRITES + varint(writes)
    event = _DATA_UPDATED + varint(len(body)) + body
    return _EVENT + varint(len(event)) + event
