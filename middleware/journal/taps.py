"""Where the middleware's state meets the journal: the ESS observer and the store tap."""

from __future__ import annotations

from ess import DropReason, EventSubSystem
from middleware.journal.writer import Journal
from vstore import VStore

__all__ = ["DropJournal", "PublishTap"]

_REASONS = {
    DropReason.EVICTED: "queue full: a newer event of the key replaced it",
    DropReason.LOST: "queue full: no event of the key to replace",
    DropReason.DISCARDED: "queued, then thrown away (subscription, key or stream ended)",
}


class DropJournal:
    """The ESS observer: every evicted, lost or discarded event becomes a record."""

    def __init__(self, journal: Journal, store: VStore) -> None:
        self._journal = journal
        self._store = store

    def event_dropped(self, app: str, key: int, queue: int, seq: int, reason: DropReason) -> None:
        self._journal.record(
            reason.value,
            app=app,
            key=self._store.name_of(key),
            key_id=key,
            queue=queue,
            seq=seq,
            reason=_REASONS[reason],
        )

    def event_queued(self, app: str, key: int, queue: int, seq: int) -> None:
        self._journal.record("queued", app=app, key_id=key, queue=queue, seq=seq)


class PublishTap:
    """The V-Store's listener at the full level: the ESS first, then a ``publish`` record.

    ``writer`` is set by the servicer around each write (one event loop: no race).
    """

    def __init__(self, journal: Journal, store: VStore, ess: EventSubSystem) -> None:
        self._journal = journal
        self._store = store
        self._ess = ess
        self.writer = ""

    def key_added(self, key_id: int, name: str) -> None:
        self._ess.key_added(key_id, name)

    def key_removed(self, key_id: int, name: str) -> None:
        self._ess.key_removed(key_id, name)

    def data_updated(self, key_id: int, changed: bool) -> None:
        self._ess.data_updated(key_id, changed)
        store = self._store
        data = store.peek(key_id)[0]
        self._journal.record(
            "publish",
            key=store.name_of(key_id),
            key_id=key_id,
            version=store.version_of(key_id),
            changed=changed,
            size=len(data or b""),
            writer=self.writer,
        )
