"""The journal's reliable consumers: who they are, what they acknowledged, what they lost.

A reliable consumer (docs/design.md, "The journal's consumers") is an app's
*component*, a name of 1 to 16 characters of ``[A-Za-z0-9_]``; ``LIVE`` is
reserved for live consumers, who never register and pin nothing. A registered
consumer has a position, the ``(boot_id, offset)`` of the last record it
acknowledged: retention keeps everything after it (up to a bound, see
:mod:`vehicle_middleware.server.journal.pinning`). When retention cuts a consumer loose, the
registry notes what it lost (:class:`Lost`) so its next recovery answer can say
so.

Persisted in ``DIR/.journal-consumers`` (JSON, written to a temporary file and
renamed): registrations and cuts at once (with fsync), acknowledgements at
most once a second by :meth:`Consumers.flush_lazily`, which the journal's
writer thread calls (a crash loses at most a second of them: the consumer is
then served a little again, never less). A dot name: segment globs and
Hadoop readers skip it. Thread-safe: the writer thread cuts, the event loop
registers (in a thread) and acknowledges. The event loop reads the registry
on every Poll, Follow group and metrics scrape, so the lock guards memory
only: a change takes a snapshot under it and writes the file outside it (a
second lock keeps the writes in order); an acknowledgement does no I/O.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, succ
from vehicle_middleware.server.errors import InvalidRequestError, LimitExceededError

__all__ = [
    "CONSUMERS_NAME",
    "LIVE",
    "MAX_LOST",
    "Consumer",
    "Consumers",
    "Lost",
    "check_component",
]

log = logging.getLogger(__name__)

CONSUMERS_NAME: Final = ".journal-consumers"
LIVE: Final = "LIVE"
"""The component of live consumers: never registered, pins nothing."""
_COMPONENT: Final = re.compile(r"[A-Za-z0-9_]{1,16}", re.ASCII)
MAX_LOST: Final = 64
"""Lost ranges kept per consumer until it acknowledges past them (the oldest go first)."""
_FLUSH_EVERY_S: Final = 1.0


def check_component(component: str, *, field_name: str = "component", live: bool = True) -> None:
    """Refuse a malformed component name; ``LIVE`` too unless ``live``.

    Raises:
        InvalidRequestError: naming the field and what is allowed.
    """
    if _COMPONENT.fullmatch(component) is None:
        raise InvalidRequestError(
            field_name, f"must be 1 to 16 characters of [A-Za-z0-9_], got {component!r}"
        )
    if component == LIVE and not live:
        raise InvalidRequestError(
            field_name,
            "'LIVE' is reserved for live consumers, which do not register (they poll or "
            "follow as LIVE and pin nothing); register another name",
        )


@dataclass(frozen=True, slots=True)
class Lost:
    """Offsets ``from_offset..to_offset`` (inclusive, may wrap) of a boot that a
    consumer will never get: retention removed them before it acknowledged them."""

    boot_id: str
    from_offset: int
    to_offset: int
    count: int
    """Offsets in the range (lost journal records included)."""
    reason: str


@dataclass(slots=True)
class Consumer:
    """One registered consumer and its acknowledged position."""

    app: str
    component: str
    boot_id: str
    offset: int
    """The last record acknowledged (of ``boot_id``): everything up to it may go."""
    registered_ns: int
    acked_ns: int = 0
    lost: list[Lost] = field(default_factory=list)
    cuts: int = 0
    """Times retention cut it loose."""

    @property
    def key(self) -> tuple[str, str]:
        return self.app, self.component

    def copy(self) -> Consumer:
        return dataclasses.replace(self, lost=list(self.lost))


class Consumers:
    """The registry of one journal directory."""

    def __init__(
        self,
        directory: Path,
        *,
        max_consumers: int,
        max_per_app: int | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.path = directory / CONSUMERS_NAME
        self.max_consumers = max_consumers
        self.max_per_app = max_per_app
        """Each app's share: consumers one app may hold (``journal_max_consumers_per_app``;
        None: no share, only the registry's size)."""
        self._clock = clock
        self._lock = threading.Lock()
        self._consumers: dict[tuple[str, str], Consumer] = {}
        self._version = 0  # changes made (under _lock)
        self._file_lock = threading.Lock()  # one file write at a time, in order
        self._stored = 0  # the version the file holds (under _file_lock)
        self._synced = True  # whether that version was fsynced
        self._flushed_at = 0.0

    def load(self) -> None:
        """Read the registry file, if any. A file that does not parse is set aside
        (``.journal-consumers.bad``) and logged: its consumers must register again.

        Registrations beyond an app's share or the registry's size (saved under
        larger limits) are not kept, the newest first, each logged: a registry
        saved to disk never locks another app out across a restart."""
        try:
            data = json.loads(self.path.read_bytes())
            consumers = [
                Consumer(
                    app=str(c["app"]),
                    component=str(c["component"]),
                    boot_id=str(c["boot_id"]),
                    offset=int(c["offset"]),
                    registered_ns=int(c["registered_ns"]),
                    acked_ns=int(c.get("acked_ns", 0)),
                    lost=[Lost(**x) for x in c.get("lost", [])],
                    cuts=int(c.get("cuts", 0)),
                )
                for c in data["consumers"]
            ]
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError) as e:
            bad = self.path.with_name(self.path.name + ".bad")
            with contextlib.suppress(OSError):
                os.replace(self.path, bad)
            log.error("journal: %s does not parse (%s); set aside as %s", self.path, e, bad.name)
            return
        kept: dict[tuple[str, str], Consumer] = {}
        per_app: dict[str, int] = {}
        for c in sorted(consumers, key=lambda c: (c.registered_ns, c.key)):
            held = per_app.get(c.app, 0)
            share = self.max_consumers if self.max_per_app is None else self.max_per_app
            if held >= share or len(kept) >= self.max_consumers:
                log.warning(
                    "journal: consumer %s/%s dropped from the registry: its app would hold %d "
                    "(journal_max_consumers_per_app %d), the registry %d "
                    "(journal_max_consumers %d); it must register again",
                    c.app,
                    c.component,
                    held + 1,
                    share,
                    len(kept) + 1,
                    self.max_consumers,
                )
                continue
            per_app[c.app] = held + 1
            kept[c.key] = c
        with self._lock:
            self._consumers = kept
            dropped = len(kept) < len(consumers)
            snapshot = self._snapshot() if dropped else None
        if snapshot is not None:
            self._store(*snapshot, sync=True)

    # -- reads ----------------------------------------------------------------------

    def get(self, app: str, component: str) -> Consumer | None:
        """A copy of the consumer, or None when it is not registered."""
        with self._lock:
            c = self._consumers.get((app, component))
            return None if c is None else c.copy()

    def all(self) -> list[Consumer]:
        """Copies of every consumer, by app and component."""
        with self._lock:
            return [c.copy() for _, c in sorted(self._consumers.items())]

    def __len__(self) -> int:
        with self._lock:
            return len(self._consumers)

    # -- changes --------------------------------------------------------------------

    def register(
        self, app: str, component: str, boot_id: str, offset: int
    ) -> tuple[Consumer, bool]:
        """Register ``(app, component)`` at position ``(boot_id, offset)`` (idempotent:
        a registered consumer keeps its position). Returns it and whether it is new.

        Raises:
            InvalidRequestError: a malformed component, or ``LIVE``.
            LimitExceededError: the app holds its share (``journal consumers of app
                'A'``), or the registry is full (``journal consumers``).
        """
        check_component(component, live=False)
        with self._lock:
            c = self._consumers.get((app, component))
            if c is not None:
                return c.copy(), False
            held = sum(1 for a, _ in self._consumers if a == app)
            if self.max_per_app is not None and held >= self.max_per_app:
                raise LimitExceededError(
                    f"journal consumers of app {app!r}",
                    self.max_per_app,
                    f"it has {held} registered (each app's share, "
                    "journal_max_consumers_per_app); unregister one of its own first",
                )
            if len(self._consumers) >= self.max_consumers:
                raise LimitExceededError(
                    "journal consumers",
                    self.max_consumers,
                    f"{len(self._consumers)} are registered; unregister one first",
                )
            c = Consumer(app, component, boot_id, offset, registered_ns=self._clock())
            self._consumers[c.key] = c
            snapshot = self._snapshot()
            got = c.copy()
        self._store(*snapshot, sync=True)
        return got, True

    def unregister(self, app: str, component: str) -> bool:
        """Forget the consumer (its pins go with it); whether it was registered. Idempotent."""
        with self._lock:
            if self._consumers.pop((app, component), None) is None:
                return False
            snapshot = self._snapshot()
        self._store(*snapshot, sync=True)
        return True

    def ack(
        self,
        app: str,
        component: str,
        boot_id: str,
        offset: int,
        *,
        moves_on: Callable[[str, int], bool],
        keep_lost: Callable[[Lost], bool],
    ) -> bool:
        """Move the consumer's position to ``(boot_id, offset)`` if that is later than
        where it stands (``moves_on(its boot, its offset)``, asked under the lock: a
        retention cut may have moved it on since the caller looked) and drop the lost
        ranges ``keep_lost`` says it is past. Memory only: written by
        :meth:`flush_lazily` (or :meth:`flush`). Whether it moved."""
        with self._lock:
            c = self._consumers.get((app, component))
            if c is None or not moves_on(c.boot_id, c.offset):
                return False
            c.boot_id, c.offset, c.acked_ns = boot_id, offset, self._clock()
            c.lost = [x for x in c.lost if keep_lost(x)]
            self._version += 1
            return True

    def cut(
        self,
        app: str,
        component: str,
        boot_id: str,
        offset: int,
        lost: list[Lost],
        *,
        beyond: Callable[[Lost, str, int], Lost | None],
    ) -> list[Lost]:
        """Retention cut the consumer loose at ``(boot_id, offset)``: it lost ``lost``
        (merged with the ranges it lost just before, of the same boot); its position
        moves past them.

        Retention planned the cut from a copy of the positions: the consumer may
        have acknowledged records since. So under the lock, only what is after its
        position now is lost (``beyond(range, boot_id, offset)``: the part of a
        range after a position, None if none); when nothing is (it acknowledged
        up to the cut or past it), nothing changes and its position stays.

        Returns:
            The ranges it lost (empty: it was not cut).
        """
        with self._lock:
            c = self._consumers.get((app, component))
            if c is None:
                return []
            lost = [y for x in lost if (y := beyond(x, c.boot_id, c.offset)) is not None]
            if not lost:
                return []
            c.boot_id, c.offset = boot_id, offset
            merged = list(c.lost)
            for x in lost:
                last = merged[-1] if merged else None
                if (
                    last is not None
                    and last.boot_id == x.boot_id
                    and succ(last.to_offset) == x.from_offset
                ):
                    x = Lost(
                        x.boot_id, last.from_offset, x.to_offset, last.count + x.count, x.reason
                    )
                    merged.pop()
                merged.append(x)
            c.lost = merged[-MAX_LOST:]
            c.cuts += 1
            snapshot = self._snapshot()
        self._store(*snapshot, sync=True)
        return lost

    def flush(self) -> None:
        """Write acknowledgements not yet written, with fsync (at stop)."""
        with self._lock:
            if self._version <= self._stored:
                return
            snapshot = self._snapshot()
        self._store(*snapshot, sync=True)

    def flush_lazily(self) -> None:
        """Write acknowledgements not yet written if the file is a second old (no
        fsync). Cheap when nothing is due; called often by the journal's writer thread."""
        if self._version <= self._stored or time.monotonic() - self._flushed_at < _FLUSH_EVERY_S:
            return
        with self._lock:
            snapshot = self._snapshot()
        self._store(*snapshot, sync=False)

    def _snapshot(self) -> tuple[int, bytes]:
        """The registry as the file holds it, and its version (lock held)."""
        self._version += 1
        data: dict[str, Any] = {
            "version": 1,
            "consumers": [dataclasses.asdict(c) for _, c in sorted(self._consumers.items())],
        }
        return self._version, json.dumps(data, indent=1, sort_keys=True).encode()

    def _store(self, version: int, data: bytes, *, sync: bool) -> None:
        """Write a snapshot atomically (registry lock not held): unless the file holds a
        newer one already (then, for ``sync``, fsync that one)."""
        with self._file_lock:
            if version <= self._stored:
                if sync and not self._synced:
                    try:
                        fd = os.open(self.path, os.O_RDONLY)
                        try:
                            os.fsync(fd)
                        finally:
                            os.close(fd)
                    except OSError as e:
                        log.error("journal: cannot sync %s (%s)", self.path, e)
                        return
                    self._synced = True
                return
            tmp = self.path.with_name(self.path.name + ".tmp")
            try:
                with tmp.open("wb") as fh:
                    fh.write(data)
                    if sync:
                        fh.flush()
                        os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except OSError as e:
                log.error(
                    "journal: cannot write %s (%s); consumer positions kept in memory", tmp, e
                )
                return
            self._stored, self._synced = version, sync
            self._flushed_at = time.monotonic()

    def check(self) -> None:
        """Assert the invariants (tests)."""
        with self._lock:
            assert len(self._consumers) <= self.max_consumers
            per_app: dict[str, int] = {}
            for app, _ in self._consumers:
                per_app[app] = per_app.get(app, 0) + 1
            share = self.max_consumers if self.max_per_app is None else self.max_per_app
            assert all(n <= share for n in per_app.values())
            for key, c in self._consumers.items():
                assert key == c.key
                assert _COMPONENT.fullmatch(c.component)
                assert c.component != LIVE
                assert 0 <= c.offset < OFFSET_MOD
                assert len(c.lost) <= MAX_LOST
