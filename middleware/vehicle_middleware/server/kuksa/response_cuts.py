"""A KUKSA subscription's drained events, cut into its responses' updates.

A KUKSA response maps a path to one datapoint, so a drained batch is cut where
a key repeats; lifecycle and health events have no response. A KUKSA
subscriber wants the value with every write: its ESS subscriptions ask for it
(``SubscriptionRequest.with_value``), so every data event carries one, and an
update is the data event as drained (a ``DataRow``: key id, seq, write time,
value, queue), not a new tuple.

Most drained batches are all data with each key once (a provider's publish
names a key once): one response, the batch itself, found by one set of its
keys.

The fast implementation of :class:`vehicle_middleware.server.codecs.Cut` (its reference twin:
:func:`vehicle_middleware.server.kuksa.entries_reference.cut`), in its own module so that
the build with ``VMW_MYPYC=1`` compiles it with the subscription's encoder
(:mod:`vehicle_middleware.server.kuksa.entries`): it runs for every event a KUKSA subscriber
is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from vehicle_middleware.ess import DataRow, Event, RawEvent, data_rows

__all__ = ["Update", "cut"]

Update = DataRow
"""A response's update: a data event's fields (key id, seq, write time in ns, value
bytes, queue); KUKSA sends the key, the value and the time. A value of None: the
key has none yet (the subscription's first response only)."""


def cut(events: Sequence[Event | RawEvent]) -> list[Sequence[Update]]:
    """The data events of ``events`` as the updates of KUKSA responses, in delivery
    order, each key at most once in one, and as few responses as that allows."""
    rows = data_rows(events)
    if len({row[0] for row in rows}) == len(rows):
        return [rows] if rows else []
    batches: list[Sequence[Update]] = []
    batch: list[Update] = []
    seen: set[int] = set()
    for row in rows:
        key = row[0]
        if key in seen:
            batches.append(batch)
            batch, seen = [], set()
        batch.append(row)
        seen.add(key)
    batches.append(batch)
    return batches
