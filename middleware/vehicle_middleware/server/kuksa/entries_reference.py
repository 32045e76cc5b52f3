"""A KUKSA v2 subscription's responses, cut and built by the generated protobuf code.

The reference twins of :func:`vehicle_middleware.server.kuksa.response_cuts.cut` (a drained batch
cut
into responses, :class:`vehicle_middleware.server.codecs.Cut`) and of
:class:`vehicle_middleware.server.kuksa.entries.Entries` (a response's bytes,
:class:`vehicle_middleware.server.codecs.EntryEncoder`): each response a
``SubscribeResponse`` or ``SubscribeByIdResponse`` whose map's datapoints are
filled by :mod:`vehicle_middleware.server.kuksa.convert`, then serialized.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from google.protobuf.message import Message
from vehicle_middleware.ess import DataRow, Event, RawEvent, data_rows
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.vss import Signal

__all__ = ["EntryMessages", "cut"]


def cut(events: Sequence[Event | RawEvent]) -> list[Sequence[DataRow]]:
    """The data events of ``events`` as the updates of KUKSA responses, in delivery
    order, a new response where a key repeats (a response maps a key to one
    datapoint); lifecycle and health events have none."""
    responses: list[Sequence[DataRow]] = []
    response: list[DataRow] = []
    keys: set[int] = set()
    for event in data_rows(events):  # lifecycle and health events have none
        key = event[0]
        if key in keys:
            responses.append(response)
            response, keys = [], set()
        response.append(event)
        keys.add(key)
    if response:
        responses.append(response)
    return responses


class EntryMessages:
    """The responses of one subscription stream: ``response`` is the message type
    (``SubscribeResponse`` or ``SubscribeByIdResponse``), ``by_name`` whether its map
    is keyed by path (else by id). ``name_of`` and ``signal_of`` look a key up by id
    and its signal by name, once per key: an id cannot change its key under a
    subscription, since a removed key ends the subscriptions on it."""

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
        self._keys: dict[int, tuple[str | int, Signal | None]] = {}

    def encode(self, batch: Iterable[DataRow]) -> bytes:
        """One response's bytes: an entry per update, its value and write time (none
        for a key without a value yet); a key whose id names no key is left out."""
        response = self._response()
        for key_id, _, time_ns, data, _ in batch:
            known = self._key(key_id)
            if known is None:
                continue
            key, signal = known
            point = response.entries[key]  # type: ignore[attr-defined]
            if convert.set_wire(point.value, data, signal):
                convert.set_timestamp(point.timestamp, time_ns)
        return response.SerializeToString()

    def _key(self, key_id: int) -> tuple[str | int, Signal | None] | None:
        """The key of ``key_id`` in the response's map and its signal, kept; None for
        an id that names no key."""
        known = self._keys.get(key_id)
        if known is None:
            name = self._name_of(key_id)
            if name is None:
                return None
            known = self._keys[key_id] = (
                name if self._by_name else key_id,
                self._signal_of(name),
            )
        return known
