"""Where the middleware's state meets the journal: the ESS observer and the store tap."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.contract.values import FAILURE_TAG, Failure, decode, is_failure
from vehicle_middleware.ess import (
    ONE_WRITE_MAX,
    DropReason,
    Event,
    EventSubSystem,
    Filter,
    RawEvent,
    data_rows,
    unpack_queue,
)
from vehicle_middleware.server.journal.writer import Journal
from vehicle_middleware.vstore import VStore

__all__ = ["DropJournal", "PublishTap", "filter_record", "record_delivered"]

_DROPS: Final = {
    DropReason.EVICTED: (Kind.EVICTED, "queue full: a newer event of the key replaced it"),
    DropReason.LOST: (Kind.LOST, "queue full: no event of the key to replace"),
    DropReason.DISCARDED: (
        Kind.DISCARDED,
        "queued, then thrown away (subscription, key or stream ended)",
    ),
}
"""Per drop: its record's kind and reason."""
# Bound once: an enum member's lookup on its class is an attribute lookup per use.
_PUBLISH_BATCH: Final = Kind.PUBLISH_BATCH
_DELIVERED_BATCH: Final = Kind.DELIVERED_BATCH


def filter_record(flt: Filter | None) -> dict[str, Any] | None:
    """A ``register`` record's ``filter`` field (records.Kind.REGISTER): None for no
    filter."""
    if flt is None or flt.empty:
        return None
    return {
        "min_interval_ms": flt.min_interval_ms,
        "threshold": flt.threshold,
        "range": list(flt.range) if flt.range is not None else None,
    }


class DropJournal:
    """The ESS observer: every evicted, lost or discarded event becomes a record."""

    def __init__(self, journal: Journal, store: VStore) -> None:
        self._journal = journal
        self._store = store

    def event_dropped(
        self, app: str, key: int, queue: int, seq: int, reason: DropReason, writes: int = 1
    ) -> None:
        kind, why = _DROPS[reason]
        name = self._store.name_of(key)
        if writes == 1:
            self._journal.record(
                kind, app=app, key=name, key_id=key, queue=queue, seq=seq, reason=why
            )
        else:  # a filtered subscription's event
            self._journal.record(
                kind,
                app=app,
                key=name,
                key_id=key,
                queue=queue,
                seq=seq,
                reason=why,
                writes=writes,
            )


class PublishTap:
    """The V-Store's listener at the full level: the ESS first, then the journal.

    The writes of one request (between :meth:`begin` and :meth:`end`, see
    ``WritePath.writing``) make one ``publish_batch`` record; a write outside a
    request makes one of its own. A write of a failure in place of a value
    (:class:`vehicle_middleware.contract.values.Failure`) gives the record its
    ``failures``, each write's code (null for a value); a record of values only
    has none. A value is told from a failure by its first byte.
    """

    def __init__(self, journal: Journal, store: VStore, ess: EventSubSystem) -> None:
        self._journal = journal
        self._store = store
        self._ess = ess
        self._writer = ""
        self._open = False
        # (key_id, name, version, changed, size) of each write not yet recorded.
        self._writes: list[tuple[int, str | None, int, bool, int]] = []
        # (index in _writes, code) of each failure among them.
        self._failures: list[tuple[int, str]] = []

    def begin(self, writer: str) -> None:
        self._writer, self._open = writer, True

    def end(self) -> None:
        self._open = False
        self._flush()
        self._writer = ""

    def key_added(self, key_id: int, name: str) -> None:
        self._ess.key_added(key_id, name)

    def key_removed(self, key_id: int, name: str) -> None:
        self._flush()  # its id may be reused: the writes before name the old key
        self._ess.key_removed(key_id, name)

    def data_updated(self, key_id: int, changed: bool, data: bytes, time_ns: int) -> None:
        self._ess.data_updated(key_id, changed, data, time_ns)
        store = self._store
        self._writes.append(
            (key_id, store.name_of(key_id), store.version_of(key_id), changed, len(data))
        )
        if data and data[0] == FAILURE_TAG and is_failure(data):  # rare: parsed only then
            failure = decode(data)
            if isinstance(failure, Failure):
                self._failures.append((len(self._writes) - 1, failure.code.label))
        if not self._open:
            self._flush()

    def _flush(self) -> None:
        if not self._writes:
            return
        key_ids, keys, versions, changes, sizes = zip(*self._writes, strict=True)
        count = len(self._writes)
        self._writes = []
        # ``failures`` only where a write of the batch is one: ordinary writes add nothing.
        extra: dict[str, list[str | None]] = {}
        if self._failures:
            failures: list[str | None] = [None] * count
            for index, code in self._failures:
                failures[index] = code
            self._failures = []
            extra["failures"] = failures
        self._journal.record(
            _PUBLISH_BATCH,
            writer=self._writer,
            key_ids=key_ids,
            keys=keys,
            versions=versions,
            changes=changes,
            sizes=sizes,
            **extra,
        )


def record_delivered(
    journal: Journal, app: str, events: Sequence[Event | RawEvent], *, several: bool
) -> None:
    """One ``delivered_batch`` record for the data events of a batch handed to ``app``
    (each a ``DataUpdated`` or the plain tuple of its fields), as drained: its
    lifecycle events, if any, first. ``several``: whether an event of the batch may
    stand for several writes (the app's queues took one:
    ``EventSubSystem.multi_write_pushes``); only then are its rows looked into, for
    ``write_counts``.

    A batch that begins with a data event is all data (the common case: its
    fields are gathered as they are, without a filtered copy; this runs for
    every batch every app is sent: :func:`vehicle_middleware.ess.data_rows`)."""
    data = data_rows(events)
    if not data:
        return
    # strict=False: every data event has the same five fields, so the check would find nothing.
    key_ids, seqs, times, _, queues = zip(*data, strict=False)
    extra: dict[str, list[int]] = {}
    if several and max(queues) > ONE_WRITE_MAX:  # some event stands for several writes
        unpacked = [unpack_queue(q) for q in queues]
        queues = tuple(q for q, _ in unpacked)
        extra["write_counts"] = [w for _, w in unpacked]
    journal.record(
        _DELIVERED_BATCH,
        app=app,
        sent_ns=time.time_ns(),
        key_ids=key_ids,
        seqs=seqs,
        queues=queues,
        write_times_ns=times,
        **extra,
    )
