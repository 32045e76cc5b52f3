"""Where local writes become replicated events: a V-Store listener in front of the others.

Installed only on a node with peers. It passes every V-Store event on to the
listener it wraps (the ESS, or the journal's publish tap) first, unchanged,
and notes each write this node made (name, value, version, time: read as the
write happened, no copy of the value). The writes of one request (between
:meth:`ClusterTap.begin` and :meth:`ClusterTap.end`, which
``WritePath.writing`` calls) become one event (more if they are large); a
write outside a request, one of its own. Writes that came from peers pass
through unnoted (:attr:`ClusterTap.applying`).
"""

from __future__ import annotations

from collections.abc import Callable

from vehicle_middleware.replica import Write
from vehicle_middleware.vstore import StoreListener, VStore

__all__ = ["ClusterTap"]


class ClusterTap:
    """The V-Store's listener on a node with peers."""

    __slots__ = (
        "_bytes",
        "_depth",
        "_group",
        "_inner",
        "_max_bytes",
        "_on_forget",
        "_on_writes",
        "_store",
        "applying",
    )

    def __init__(
        self,
        inner: StoreListener,
        store: VStore,
        on_writes: Callable[[list[Write]], None],
        on_forget: Callable[[str], None],
        *,
        max_event_bytes: int,
    ) -> None:
        """Args:
        inner: the listener every V-Store event is passed to first.
        on_writes: called with each event's writes, in order.
        on_forget: called with the name of a key removed on this node.
        max_event_bytes: a request's writes beyond this many bytes start another event.
        """
        self._inner = inner
        self._store = store
        self._on_writes = on_writes
        self._on_forget = on_forget
        self._max_bytes = max_event_bytes
        self._group: list[Write] = []
        self._bytes = 0
        self._depth = 0
        self.applying = False
        """True while writes from peers are applied: they are not this node's."""

    def begin(self) -> None:
        self._depth += 1

    def end(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._flush()

    def key_added(self, key_id: int, name: str) -> None:
        self._inner.key_added(key_id, name)
        if not self.applying:
            self._note(Write(name, None, 0, 0), len(name))

    def key_removed(self, key_id: int, name: str) -> None:
        self._flush()  # writes before the removal travel before it is forgotten
        self._inner.key_removed(key_id, name)
        if not self.applying:
            self._on_forget(name)

    def data_updated(self, key_id: int, changed: bool, data: bytes, time_ns: int) -> None:
        self._inner.data_updated(key_id, changed, data, time_ns)
        if self.applying:
            return
        store = self._store
        name = store.name_of(key_id)
        assert name is not None
        self._note(Write(name, data, store.version_of(key_id), time_ns), len(name) + len(data))

    def _note(self, write: Write, size: int) -> None:
        if self._group and self._bytes + size > self._max_bytes:
            self._flush()
        self._group.append(write)
        self._bytes += size + 48
        if self._depth == 0:
            self._flush()

    def _flush(self) -> None:
        if self._group:
            group, self._group, self._bytes = self._group, [], 0
            self._on_writes(group)
