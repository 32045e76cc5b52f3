"""A KUKSA subscription's drained events, cut into its responses' updates.

A KUKSA response maps a path to one datapoint, so a drained batch is cut where
a key repeats; lifecycle and health events have no response. A KUKSA
subscriber wants the value with every write, and an ON_UPDATE event of an
unchanged write carries none: the stream's last value of the key stands in.

Its own module so that the build with ``VMW_MYPYC=1`` compiles it with the
subscription's encoder (:mod:`vmw.server.kuksa.entries`): it runs for every
event a KUKSA subscriber is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from vmw.ess import Event, RawEvent

__all__ = ["Update", "cut"]

Update = tuple[int, bytes | None, int]
"""``(key id, value bytes, write time in ns)``."""


def cut(events: Sequence[Event | RawEvent], last: dict[int, bytes | None]) -> list[list[Update]]:
    """``events`` as the updates of KUKSA responses, in delivery order, each key at
    most once in one; ``last`` (key id -> its last value sent) is kept up to date."""
    batches: list[list[Update]] = []
    batch: list[Update] = []
    seen: set[int] = set()
    for e in events:
        if not isinstance(e, tuple):  # a data event is a DataUpdated or its fields' tuple
            continue
        key, _, time_ns, data, _ = e  # unpacked: a third of the cost of the attributes
        if data is None:
            data = last.get(key)
        last[key] = data
        if key in seen:
            batches.append(batch)
            batch, seen = [], set()
        batch.append((key, data, time_ns))
        seen.add(key)
    if batch:
        batches.append(batch)
    return batches
