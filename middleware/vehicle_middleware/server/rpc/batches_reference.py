"""An app stream's ``EventBatch`` messages, built by the generated protobuf code.

The reference twin of :class:`vehicle_middleware.server.rpc.batches.EventBytes` behind
:class:`vehicle_middleware.server.codecs.BatchEncoder`: the same messages, cut at the same
events, each built with ``ess_pb2`` (through
:func:`vehicle_middleware.server.rpc.convert.event_batch`) and serialized. A message's bytes
are its fields' bytes one after the other, so a batch's bytes are its events'
bytes, each serialized as a one-event batch: a batch is cut between two of
those.
"""

from __future__ import annotations

from collections.abc import Sequence

from vehicle_middleware.ess import Event, RawEvent
from vehicle_middleware.server.rpc.convert import event_batch

__all__ = ["EventMessages"]


class EventMessages:
    """The messages of one app stream, each drained batch as one ``EventBatch``, or as
    several where one would exceed the message limit. Keeps nothing between batches."""

    __slots__ = ()

    def messages(self, events: Sequence[Event | RawEvent], max_bytes: int) -> list[bytes]:
        """``events`` in messages of at most ``max_bytes`` each (an event bigger than
        that alone in its own). Lifecycle and health events go first, then the data
        events (a ``DataUpdated`` or the plain tuple of its fields), as a drain hands
        them out."""
        others = [e for e in events if not isinstance(e, tuple)]
        data = [e for e in events if isinstance(e, tuple)]
        out: list[bytes] = []
        message = bytearray()
        for event in [*others, *data]:
            piece = event_batch([event]).SerializeToString()
            if message and len(message) + len(piece) > max_bytes:
                out.append(bytes(message))
                message.clear()
            message += piece
        if message or not out:
            out.append(bytes(message))
        return out
