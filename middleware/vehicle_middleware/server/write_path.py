"""The write path's bookkeeping: one request is one write, the head, the key-id assignment.

:class:`WritePath` brackets the writes of one request (:meth:`WritePath.writing`):
journaled at the ``full`` level with the app as the writer, one replicated
event on a node with peers, one step of the head on a node without. It names
the head a ``Set`` with ``if_head`` compares with, and the key-id assignment
(``keys_version``) a provider's ids come from, which every key removal changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType

from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.cluster.node import ClusterNode
from vehicle_middleware.server.journal.taps import PublishTap
from vehicle_middleware.vstore import VStore

__all__ = ["WritePath"]


class WritePath:
    """The writes of one middleware process, as requests."""

    def __init__(
        self,
        boot_id: str,
        store: VStore,
        claims: WriteClaims,
        publish_tap: PublishTap | None,
        cluster: ClusterNode | None,
    ) -> None:
        self._boot_id = boot_id
        self._store = store
        self._claims = claims
        self._tap = publish_tap
        self._cluster = cluster
        self._writes = 0
        self._counted = _HeadStep(self)
        self._head: tuple[int, str] = (0, "")
        self._removals = 0
        self.keys_version = f"{boot_id}.0"
        """Names the current key-id assignment: changes with the boot and every removal."""

    def writing(self, app: str) -> AbstractContextManager[None]:
        """Writes inside are one request: journaled (at the full level) with
        ``app`` as the writer, one replicated event on a node with peers, one
        step of the head on a node without."""
        if self._tap is None and self._cluster is None:
            return self._counted  # every Publish message comes here: no generator made
        return self._bracketed(app)

    @contextmanager
    def _bracketed(self, app: str) -> Iterator[None]:
        tap = self._tap
        cluster = self._cluster
        if tap is not None:
            tap.begin(app)
        if cluster is not None:
            cluster.tap.begin()
        try:
            yield
        finally:
            if cluster is not None:
                cluster.tap.end()
            if tap is not None:
                tap.end()
        self._writes += 1

    def head(self) -> str:
        """The head (hex): what a ``Set`` with ``if_head`` names.

        With peers, the hash of the newest event this node applied
        (:mod:`vehicle_middleware.replica`). Without, a hash of the boot and the count of write
        requests (computed when asked: nothing on the write path); empty
        before the first write either way.
        """
        if self._cluster is not None:
            return self._cluster.head
        count, head = self._head
        if count != self._writes:
            count = self._writes
            head = hashlib.sha256(f"{self._boot_id}:{count}".encode()).hexdigest()
            self._head = (count, head)
        return head

    def remove_keys(self, names: Sequence[str]) -> tuple[list[tuple[str, int]], list[str]]:
        """Remove keys; returns ``(removed (name, old id), not found)``.

        Bumps :attr:`keys_version`: a removed id may be handed to the next new key.
        A removed key's write claim goes with it.
        """
        removed: list[tuple[str, int]] = []
        not_found: list[str] = []
        for name in names:
            if name in self._store:
                removed.append((name, self._store.remove_key(name)))
                self._claims.forget_key(name)
            else:
                not_found.append(name)
        if removed:
            self._removals += 1
            self.keys_version = f"{self._boot_id}.{self._removals}"
        return removed, not_found


class _HeadStep(AbstractContextManager[None]):
    """:meth:`WritePath.writing` on a node with no journal tap and no peers: a request
    that wrote counts as one step of the head."""

    __slots__ = ("_of",)

    def __init__(self, of: WritePath) -> None:
        self._of = of

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self._of._writes += 1
