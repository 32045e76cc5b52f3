"""The journal as its consumers see it: the history in memory, the segments on disk,
the registry of reliable consumers and the answers, in one object.

Two sides, one per caller:

- the consumers' API (:meth:`Feed.register`, :meth:`Feed.unregister`,
  :meth:`Feed.states`, :meth:`Feed.acknowledge`, :meth:`Feed.acknowledge_held`,
  :meth:`Feed.poll`) is async: the journal service
  (:mod:`vehicle_middleware.server.rpc.journal_service`) and its
  :class:`~vehicle_middleware.server.journal.follow.FollowSession`\\ s call it on the event
  loop. What memory answers is answered there; what needs the disk (listing
  the directory, reading segments, syncing the registry) runs in
  ``asyncio.to_thread``, all of one step in one call, never on the loop;
- retention's side (:meth:`Feed.plan_retention`, :meth:`Feed.apply_cuts`,
  :meth:`Feed.tick`, :meth:`Feed.removed`, :meth:`Feed.close`) is
  synchronous: the journal writer's thread calls it
  (:class:`~vehicle_middleware.server.journal.retention.RetentionGuard`) so that retention
  keeps what consumers have not acknowledged.

The rules are in the pure modules: :mod:`answers` (which answer),
:mod:`pinning` (what retention may remove).

A poll served from memory (the consumer keeps up) takes the history's lock
once and lists no directory; only a consumer behind the history reads disk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance, pred, succ
from vehicle_middleware.contract.journal.segments import segment_files
from vehicle_middleware.server.errors import (
    OffsetOutOfRangeError,
    UnavailableError,
    UnknownConsumerError,
)
from vehicle_middleware.server.journal.archive import Archive
from vehicle_middleware.server.journal.consumers import (
    LIVE,
    Consumer,
    Consumers,
    Lost,
    check_component,
)
from vehicle_middleware.server.journal.history import History, Slice
from vehicle_middleware.server.journal.pinning import Cut, Pin, Plan, lag_bytes, plan
from vehicle_middleware.server.journal.poll_answers import (
    Nothing,
    Read,
    Reason,
    Recover,
    View,
    answer,
    later,
    lost_after,
    lost_beyond,
)
from vehicle_middleware.server.metrics.collectors import Figure

__all__ = ["ConsumerState", "Feed", "Records"]

_HALF: Final = OFFSET_MOD // 2

log = logging.getLogger(__name__)

_TRIES: Final = 4


@dataclass(frozen=True, slots=True)
class Records:
    """Answer 1 as served: the records after the consumer's offset."""

    boot_id: str
    lines: tuple[bytes, ...]
    last_offset: int
    """The last record read (wanted or skipped by the filter): poll with it next."""
    newest_boot_id: str
    newest_offset: int
    """The newest record written (the consumer's lag: from ``last_offset`` to it)."""
    caught_up: bool
    """Whether ``last_offset`` is the newest record written."""


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """A registered consumer, with what it holds back."""

    consumer: Consumer
    lag_bytes: int
    """Bytes on disk of segments holding records it has not acknowledged."""


class Feed:
    """One journal directory, read by consumers."""

    def __init__(
        self,
        directory: Path,
        *,
        boot_id: str,
        first_offset: int,
        history: History,
        consumers: Consumers,
        max_lag_bytes: int,
        answer_bytes: int,
    ) -> None:
        self.directory = directory
        self.boot_id = boot_id
        self.first_offset = first_offset
        self.history = history
        self.archive = Archive(directory)
        self.consumers = consumers
        self.max_lag_bytes = max_lag_bytes
        self.answer_bytes = answer_bytes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: set[asyncio.Event] = set()
        self._cut: set[tuple[str, str]] = set()  # consumers cut loose, until they read again
        self.ended = False
        """The journal wrote its last record (``stop``): see :meth:`end`."""
        history.on_add(self._added)

    # -- what is held ---------------------------------------------------------------

    def view(self) -> View:
        """The boots held now (disk, and the current boot's newest from memory)."""
        window = self.history.window()
        spans = self.archive.boots(
            current=self.boot_id, current_last=None if window is None else window[1]
        )
        return View(tuple(spans), self.boot_id, self.first_offset)

    # -- the registry ---------------------------------------------------------------

    async def register(
        self, app: str, component: str, *, from_newest: bool
    ) -> tuple[Consumer, bool]:
        """Register a reliable consumer (idempotent). A new one starts before the oldest
        record held (``from_newest``: after the newest). Returns it and whether it is new.

        Reads the segments (the oldest record held) and syncs the registry: in a thread.

        Raises:
            InvalidRequestError: a malformed component.
            LimitExceededError: the app holds its share, or the registry is full.
        """
        return await asyncio.to_thread(self._register, app, component, from_newest)

    def _register(self, app: str, component: str, from_newest: bool) -> tuple[Consumer, bool]:
        check_component(component, live=False)
        existing = self.consumers.get(app, component)
        if existing is not None:
            return existing, False
        view = self.view()
        if from_newest or not view.boots:
            window = self.history.window()
            start = (self.boot_id, window[1] if window else pred(self.first_offset))
        else:
            start = (view.boots[0].boot_id, pred(view.boots[0].first))
        consumer, created = self.consumers.register(app, component, *start)
        log.info(
            "journal: consumer %s/%s registered at boot %s offset %d",
            app,
            component,
            consumer.boot_id,
            consumer.offset,
        )
        return consumer, created

    async def unregister(self, app: str, component: str) -> bool:
        """Forget a registered consumer; whether it was registered. Syncs the registry:
        in a thread.

        Raises:
            InvalidRequestError: a malformed component.
        """
        return await asyncio.to_thread(self._unregister, app, component)

    def _unregister(self, app: str, component: str) -> bool:
        check_component(component, live=False)
        gone = self.consumers.unregister(app, component)
        if gone:
            log.info("journal: consumer %s/%s unregistered", app, component)
        return gone

    async def states(self, app: str | None = None) -> list[ConsumerState]:
        """Registered consumers (of ``app``, or all) with their unacknowledged bytes.
        Lists the segments: in a thread."""
        return await asyncio.to_thread(self._states, app)

    def _states(self, app: str | None) -> list[ConsumerState]:
        segments = self.archive.segments()
        return [
            ConsumerState(c, lag_bytes(Pin(c.app, c.component, c.boot_id, c.offset), segments))
            for c in self.consumers.all()
            if app is None or c.app == app
        ]

    def consumer(self, app: str, component: str) -> Consumer | None:
        """The registered consumer; None for LIVE. From memory: no disk.

        Raises:
            InvalidRequestError: a malformed component.
            UnknownConsumerError: not registered.
        """
        check_component(component)
        if component == LIVE:
            return None
        c = self.consumers.get(app, component)
        if c is None:
            raise UnknownConsumerError(app, component)
        return c

    async def acknowledge(self, consumer: Consumer, boot_id: str, offset: int) -> None:
        """Move a registered consumer on to ``(boot_id, offset)`` if that is later.

        When both positions are in the running boot's history (a consumer that
        keeps up) it is done on the event loop; else the directory is listed to
        order them, in a thread.
        """
        if not self._acknowledge_in_memory(consumer, boot_id, offset):
            await asyncio.to_thread(self._acknowledge_blocking, consumer, boot_id, offset)

    async def acknowledge_held(self, consumer: Consumer, boot_id: str, offset: int) -> None:
        """Acknowledge ``(boot_id, offset)`` (empty boot: the current one) only when it is a
        position held, as :meth:`poll` does: one whose answer is records or nothing new.

        A position not held (a new consumer's ``("", 0)``, an offset of a boot no
        longer held, one behind what is held) acknowledges nothing: the consumer
        keeps its registered position, and what it pins, until it acknowledges
        a position it was actually served (e.g. the recovery answer's ``p(n0)``).
        Nothing written yet: nothing acknowledged. A position in memory is
        acknowledged as :meth:`acknowledge` does; any other is looked up on
        disk, in a thread.

        Raises:
            OffsetOutOfRangeError: the named boot never wrote ``offset``.
        """
        if self._held_in_memory(boot_id, offset):
            await self.acknowledge(consumer, self.boot_id, offset)
        else:
            await asyncio.to_thread(self._acknowledge_held_blocking, consumer, boot_id, offset)

    def _acknowledge_blocking(self, consumer: Consumer, boot_id: str, offset: int) -> None:
        """:meth:`acknowledge` where it may list the directory (a thread's)."""
        if not self._acknowledge_in_memory(consumer, boot_id, offset):
            view = self.view()
            if later(view, (consumer.boot_id, consumer.offset), (boot_id, offset)):
                self.consumers.ack(
                    consumer.app,
                    consumer.component,
                    boot_id,
                    offset,
                    moves_on=lambda b, o: later(view, (b, o), (boot_id, offset)),
                    keep_lost=lambda x: lost_after(view, x, boot_id, offset),
                )

    def _acknowledge_held_blocking(self, consumer: Consumer, boot_id: str, offset: int) -> None:
        """:meth:`acknowledge_held` where it may list the directory (a thread's)."""
        if self._held_in_memory(boot_id, offset):
            self._acknowledge_blocking(consumer, self.boot_id, offset)
            return
        try:
            a = answer(self.view(), boot_id, offset)
        except UnavailableError:
            return
        if not isinstance(a, Recover):
            self._acknowledge_blocking(consumer, a.boot_id, a.offset)

    def _held_in_memory(self, boot_id: str, offset: int) -> bool:
        """Whether the position is the running boot's and in memory (``p(n0)`` included).
        ``("", 0)`` holds nothing: never a position in memory, whatever the offsets wrapped
        through."""
        if (boot_id or self.boot_id) != self.boot_id or (not boot_id and offset == 0):
            return False
        window = self.history.window()
        return window is not None and _in_window(window, offset)

    def _acknowledge_in_memory(self, consumer: Consumer, boot_id: str, offset: int) -> bool:
        """Acknowledge when both positions are in the running boot's history (the usual
        case: a consumer that keeps up); False when that cannot tell."""
        if self._cut and consumer.key in self._cut:
            self._cut.discard(consumer.key)
            log.info("journal: consumer %s/%s reads again", consumer.app, consumer.component)
        if boot_id != self.boot_id or consumer.boot_id != self.boot_id:
            return False
        window = self.history.window()
        if window is None or not (
            _in_window(window, consumer.offset) and _in_window(window, offset)
        ):
            return False
        if _dist(window, offset) > _dist(window, consumer.offset):
            self.consumers.ack(
                consumer.app,
                consumer.component,
                boot_id,
                offset,
                # Where it stands now (a cut may have moved it): an earlier boot, or
                # behind the memory, is before any position in memory.
                moves_on=lambda b, o: (
                    b != boot_id
                    or not _in_window(window, o)
                    or _dist(window, offset) > _dist(window, o)
                ),
                keep_lost=lambda x: x.boot_id == boot_id and _after(x.to_offset, offset),
            )
        return True

    # -- answers --------------------------------------------------------------------

    async def poll(
        self,
        consumer: Consumer | None,
        boot_id: str,
        offset: int,
        *,
        max_records: int,
        want: frozenset[str] | None,
        acknowledge: bool = True,
        ack: tuple[str, int] | None = None,
    ) -> Records | Nothing | Recover:
        """The contract's answer to a consumer holding ``offset`` of ``boot_id`` (:mod:`answers`).

        From memory on the event loop when the position is in the history (one
        lock, a binary search, a slice); else from the segments, in a thread.
        Reads at most ``max_records`` wanted records and ``answer_bytes`` of lines.

        A registered consumer's position is acknowledged (``acknowledge``) when
        it is a position held. ``ack``: a registered consumer acknowledges this
        position instead (the last record it stored, when held): it reads ahead
        of what it stored.

        Raises:
            OffsetOutOfRangeError, UnavailableError: see :func:`answers.answer`;
                OffsetOutOfRangeError also for an ``ack`` its boot never wrote.
        """
        if consumer is not None and ack is not None:
            try:
                await self.acknowledge_held(consumer, *ack)
            except OffsetOutOfRangeError as e:
                raise OffsetOutOfRangeError(f"ack.{e}") from None
            acknowledge = False
        got = self._poll_memory(boot_id, offset, max_records, want)
        if got is not None:
            if consumer is not None and acknowledge:
                await self.acknowledge(consumer, self.boot_id, offset)
            return got
        return await asyncio.to_thread(
            self._poll_blocking, consumer, boot_id, offset, max_records, want, acknowledge
        )

    def _poll_memory(
        self, boot_id: str, offset: int, max_records: int, want: frozenset[str] | None
    ) -> Records | Nothing | None:
        """:meth:`poll`'s answer when memory has it (the position is in the history),
        else None. Cheap; acknowledges nothing. ``("", 0)`` holds nothing: never
        answered from memory (:func:`answers.answer` makes it a recovery)."""
        if (boot_id or self.boot_id) != self.boot_id or (not boot_id and offset == 0):
            return None
        return self._from_memory(offset, max_records, want)

    def _poll_blocking(
        self,
        consumer: Consumer | None,
        boot_id: str,
        offset: int,
        max_records: int,
        want: frozenset[str] | None,
        acknowledge: bool,
    ) -> Records | Nothing | Recover:
        """:meth:`poll` where it may read disk (a thread's): memory first again (the
        history may have moved on), then the answer from the segments."""
        boot = boot_id or self.boot_id
        got = self._poll_memory(boot_id, offset, max_records, want)
        if got is not None:
            if consumer is not None and acknowledge:
                self._acknowledge_blocking(consumer, self.boot_id, offset)
            return got
        home = None if consumer is None else (consumer.boot_id, consumer.offset)
        for _ in range(_TRIES):
            view = self.view()
            a = answer(view, boot_id, offset, home=home)
            if isinstance(a, Recover):
                a = self._with_memory(a)
                if consumer is not None:
                    lost = tuple(x for x in consumer.lost if lost_after(view, x, boot, offset))
                    lost += _fell_behind(a, consumer, boot_id, offset, lost)
                    if lost:
                        a = dataclasses.replace(a, reason=Reason.CUT_LOOSE, lost=lost)
                return a
            if consumer is not None and acknowledge:
                self._acknowledge_blocking(consumer, a.boot_id, a.offset)
            if isinstance(a, Nothing):
                return a
            got = self._read(a, max_records, want)
            if got is not None:
                return got
            # Retention removed what the view held, or the history moved on: look again.
        raise RuntimeError(f"journal: no stable answer for boot {boot} offset {offset}")

    def _with_memory(self, a: Recover) -> Recover:
        """A recovery in the running boot from the oldest record held in memory or on
        disk: memory may hold records retention removed, and a consumer that resumed
        from the disk's oldest would skip them unreported."""
        window = self.history.window()
        if a.boot_id != self.boot_id or window is None:
            return a
        if 0 < distance(window[0], a.n0) < _HALF:
            return dataclasses.replace(a, n0=window[0])
        return a

    def _from_memory(
        self, offset: int, max_records: int, want: frozenset[str] | None
    ) -> Records | Nothing | None:
        s = self.history.after(
            offset, max_records=max_records, max_bytes=self.answer_bytes, want=want
        )
        if s is None:
            return None
        if not s.lines and s.last_offset == offset:
            return Nothing(self.boot_id, offset)
        return self._records(self.boot_id, s)

    def _read(self, a: Read, max_records: int, want: frozenset[str] | None) -> Records | None:
        if a.boot_id == self.boot_id:
            got = self._from_memory(a.offset, max_records, want)
            if isinstance(got, Records):
                return got
        s = self.archive.read_after(
            a.boot_id,
            a.offset,
            base=a.base,
            max_records=max_records,
            max_bytes=self.answer_bytes,
            want=want,
        )
        if not s.lines and s.last_offset == a.offset:
            return None
        return self._records(a.boot_id, s)

    def _records(self, boot_id: str, s: Slice) -> Records:
        window = self.history.window()
        newest = window[1] if window is not None else s.last_offset
        return Records(
            boot_id,
            s.lines,
            s.last_offset,
            self.boot_id,
            newest,
            boot_id == self.boot_id and s.last_offset == newest,
        )

    def live_start(self, offset: int | None, keep: int) -> int:
        """Where a live follower reads on from: ``offset`` if it is in memory, else just
        before the newest ``keep`` records (0: after the newest); with nothing held yet
        (this boot has written nothing), just before the boot's first record. ``offset``
        None: the follower holds nothing (after the newest ``keep``, as for one not held)."""
        if not len(self.history):
            return pred(self.first_offset)
        if offset is None:
            window = self.history.window()
            assert window is not None
            offset = pred(window[0])
            if keep <= 0:
                return window[1]
        return self.history.tail(offset, keep)

    def figures(self) -> list[Figure]:
        """The consumers' figures for the metrics (a Prometheus scrape, GetStats): read
        from memory, no disk. A consumer's lag counts the running boot's records it has
        not acknowledged (all of them while it is in an earlier boot: at least that)."""
        window = self.history.window()
        newest = window[1] if window is not None else pred(self.first_offset)
        out = [
            Figure(
                "vmw_journal_history_records",
                "journal records held in memory for consumers",
                "gauge",
                (),
                len(self.history),
            ),
            Figure(
                "vmw_journal_history_bytes",
                "bytes of the journal records held in memory for consumers",
                "gauge",
                (),
                self.history.bytes,
            ),
        ]
        out.append(
            Figure(
                "vmw_journal_follow_streams",
                "journal Follow streams open (reliable and live)",
                "gauge",
                (),
                len(self._waiters),
            )
        )
        for c in self.consumers.all():
            labels = (("app", c.app), ("component", c.component))
            start = c.offset if c.boot_id == self.boot_id else pred(self.first_offset)
            out.append(
                Figure(
                    "vmw_journal_consumer_lag_records",
                    "records of the running boot a journal consumer has not acknowledged",
                    "gauge",
                    labels,
                    distance(start, newest),
                )
            )
            out.append(
                Figure(
                    "vmw_journal_consumer_cuts_total",
                    "times retention cut a journal consumer loose",
                    "counter",
                    labels,
                    c.cuts,
                )
            )
        return out

    # -- waking followers -------------------------------------------------------------

    def waiter(self) -> asyncio.Event:
        """An event set when records are added (after :meth:`arm`) or :meth:`wake` is called."""
        self._loop = asyncio.get_running_loop()
        event = asyncio.Event()
        self._waiters.add(event)
        return event

    def forget(self, event: asyncio.Event) -> None:
        self._waiters.discard(event)

    def arm(self) -> None:
        """The next records added wake every waiter (arm, then look, then wait)."""
        self.history.arm()

    def _added(self) -> None:
        # The writer thread: hand the wake-up to the event loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wake)

    def wake(self) -> None:
        for event in self._waiters:
            event.set()

    def end(self) -> None:
        """The journal is closed (after :meth:`Journal.close`): nothing more will be
        added. Each Follow sends what is left, sees it acknowledged, and ends."""
        self.ended = True
        self.wake()

    # -- retention (the writer thread) --------------------------------------------------

    def plan_retention(self, max_bytes: int, current: Path | None) -> tuple[Plan, int]:
        """What retention removes now, keeping consumers' records within their bound.
        Returns the plan and the journal's size."""
        files = segment_files(self.directory)
        total = 0
        for p in files:
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                continue
        pins = [Pin(c.app, c.component, c.boot_id, c.offset) for c in self.consumers.all()]
        decided = plan(
            self.archive.segments(),
            total_bytes=total,
            max_bytes=max_bytes,
            max_lag_bytes=self.max_lag_bytes,
            pins=pins,
            keep=frozenset({current.name}) if current is not None else frozenset(),
        )
        return decided, total

    def apply_cuts(self, decided: Plan) -> list[Cut]:
        """Record the plan's cuts in the registry (before the segments go); returns the
        cuts applied, each with what the consumer lost.

        The plan was made from a copy of the positions: a consumer that has
        acknowledged records since loses only what is after its position now,
        and one that acknowledged up to its cut or past it is not cut at all
        (checked under the registry's lock, see :meth:`Consumers.cut`). Logged
        once per episode: until the consumer acknowledges a record again."""
        if not decided.cuts:
            return []
        beyond = functools.partial(lost_beyond, self.view())
        applied: list[Cut] = []
        window = self.history.window()
        for planned in decided.cuts:
            cut = _beside_memory(planned, self.boot_id, window)
            if cut is None:
                continue  # all it would lose is still in memory: its next Poll returns it
            p = cut.pin
            lost = self.consumers.cut(
                p.app, p.component, cut.boot_id, cut.offset, cut.lost, beyond=beyond
            )
            if not lost:
                log.info(
                    "journal: consumer %s/%s acknowledged what retention was about to "
                    "cut: not cut loose",
                    p.app,
                    p.component,
                )
                continue
            applied.append(dataclasses.replace(cut, lost=lost))
            key = (p.app, p.component)
            if key in self._cut:
                continue
            self._cut.add(key)
            log.warning(
                "journal: consumer %s/%s cut loose: it had %d bytes unacknowledged (the bound "
                "is %d); it lost %s (and loses more while it does not read; the journal's "
                "consumer_cut records say what)",
                p.app,
                p.component,
                cut.lag_bytes,
                self.max_lag_bytes,
                ", ".join(f"{x.boot_id} {x.from_offset}..{x.to_offset}" for x in lost),
            )
        return applied

    def tick(self) -> None:
        """The writer thread's frequent call: write the registry's acknowledgements once
        a second (off the event loop, which only acknowledges in memory)."""
        self.consumers.flush_lazily()

    def removed(self, paths: Sequence[Path]) -> None:
        """Retention removed these segments (the writer thread, after the unlinks)."""
        self.archive.removed(paths)

    def close(self) -> None:
        """Write the registry's pending acknowledgements, close open segments (at stop)."""
        self.consumers.flush()
        self.archive.close()


def _beside_memory(cut: Cut, boot_id: str, window: tuple[int, int] | None) -> Cut | None:
    """``cut`` less what the running boot ``boot_id`` still holds in memory (``window``),
    so that a consumer cut loose loses exactly what its next Poll cannot return.

    Its range of that boot ends before the window, and its position moves only up
    to there (None: it loses nothing now). A consumer whose position is in that boot
    loses everything after it up to there: records retention removed earlier, while
    memory still held them, are lost now that memory let them go."""
    if window is None:
        return cut
    n0 = window[0]
    pin = cut.pin
    lost = [x for x in cut.lost if x.boot_id != boot_id]
    own = [x for x in cut.lost if x.boot_id == boot_id]
    if own:  # the running boot's records removed are one run, the last of the cut
        start = succ(pin.offset) if pin.boot_id == boot_id else own[0].from_offset
        end = own[-1].to_offset
        if distance(start, n0) <= distance(start, end):  # memory holds the run's end
            end = pred(n0)
        if start != n0 and distance(start, end) < _HALF:
            lost.append(Lost(boot_id, start, end, distance(start, end) + 1, own[0].reason))
    if not lost:
        return None
    if lost == cut.lost:
        return cut
    last = lost[-1]
    return dataclasses.replace(cut, lost=lost, boot_id=last.boot_id, offset=last.to_offset)


def _fell_behind(
    a: Recover, consumer: Consumer, boot_id: str, offset: int, told: tuple[Lost, ...]
) -> tuple[Lost, ...]:
    """What a registered consumer polling at ``(boot_id, offset)`` lost when its boot
    holds records only after that, beyond what its lost ranges tell: records retention
    removed while memory still held them (so it was not cut for them), and that memory
    let go before it read them. Only what it had not acknowledged (after its registered
    position) is lost."""
    if a.reason is not Reason.NOT_IN_HISTORY or a.boot_id != boot_id or consumer.boot_id != boot_id:
        return ()
    at = offset
    if 0 < distance(at, consumer.offset) < _HALF:
        at = consumer.offset  # it acknowledged up to there: released, not lost
    for x in told:
        if x.boot_id == boot_id and 0 < distance(at, x.to_offset) < _HALF:
            at = x.to_offset  # told already
    end = pred(a.n0)
    if not 0 < distance(at, end) < _HALF:
        return ()
    start = succ(at)
    return (Lost(boot_id, start, end, distance(start, end) + 1, "no longer held"),)


def _in_window(window: tuple[int, int], offset: int) -> bool:
    return _dist(window, offset) <= _dist(window, window[1])


def _dist(window: tuple[int, int], offset: int) -> int:
    """Distance from the position before the window's oldest record (``p(n0)``: 0)."""
    return distance(pred(window[0]), offset)


def _after(to_offset: int, offset: int) -> bool:
    return 0 < distance(offset, to_offset) < OFFSET_MOD // 2
