"""Subscriber streams, from open to end: one lifecycle and one delivery loop for every API.

An app's own event stream (``Events``, ``GetEvents``) and a KUKSA
subscription (``Subscribe`` of v1 and v2) are the same thing here: a
:class:`Session` of one ESS app. :meth:`Streams.session` opens it (one stream
per app: a newer one replaces the older), counts it among the app's open streams,
arms the timer that ends it when the caller's token expires, and on the way
out closes it and says why it ended, as one :class:`EndReason` that the
journal records (``disconnect``'s ``reason``) and the error table maps to a
status (:class:`StreamEndedError`). :meth:`Session.batches` is the delivery
loop: wait for the doorbell and for room in the window, drain up to
``batch_max`` events, hand them to the API's encoder, and once written
journal them. The APIs differ only in how they encode a batch.

Back-pressure lands in the ESS queues, not in transport buffers: on an
``Events`` stream the middleware keeps at most ``window`` messages (batches)
sent and not acknowledged by the app; while the window is full nothing is
drained, the app's queues fill, and the drop rule keeps the latest value of each
key (seq shows the loss). So what an app lags behind is bounded by its queues
plus its window of batches. The window counts batches, not events: a slow
reader then gets fewer, larger batches made when it acknowledges, of the values
queued at that time, instead of a trickle of small stale ones.
``GetEvents`` and KUKSA subscriptions (no acknowledgements) have no window:
there only gRPC flow control holds the writer back, and the transport buffers
add to the lag.

What ``delivered`` means (the journal's ``delivered_batch``): the batch was
written to the app's stream. On ``Events``, the app has then read it, or is at
most ``window`` batches behind it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Final

from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.ess import EventSubSystem, QueueConfig, RawEvent, effective_queue_configs
from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.read_policy import StreamReadPolicy
from vehicle_middleware.server.auth.scopes import ALL, Grants
from vehicle_middleware.server.auth.stream_counts import StreamCounts
from vehicle_middleware.server.config import StreamSettings
from vehicle_middleware.server.errors import (
    EndReason,
    InvalidRequestError,
    LimitExceededError,
    StreamEndedError,
)
from vehicle_middleware.server.expiry import on_expiry
from vehicle_middleware.server.journal.taps import record_delivered
from vehicle_middleware.server.journal.writer import Journal
from vehicle_middleware.server.pacing import WritePace
from vehicle_middleware.server.slow_apps import SlowAppWatch

__all__ = ["AppStream", "EndReason", "Session", "Streams", "Window", "owner_of"]

log = logging.getLogger(__name__)

UNLIMITED: Final = 1 << 62
"""The room of a stream without a window."""

Record = Callable[..., None]
"""Journals one record: ``record(kind, **fields)`` (a no-op without a journal)."""


def owner_of(app: str) -> str:
    """The app a stream counts for in the limits: a KUKSA subscription's
    (``<app>/kuksa-sub-N``, a name no caller can claim) is its app's."""
    return app.partition("/")[0]


class Window:
    """Messages sent and not yet acknowledged, at most ``size`` (pure).

    ``size`` None: no window (``GetEvents``, KUKSA subscriptions): always room.
    """

    __slots__ = ("size", "unacked")

    def __init__(self, size: int | None) -> None:
        if size is not None and size < 1:
            raise ValueError(f"a window holds at least 1 message, got {size}")
        self.size = size
        self.unacked = 0

    def room(self) -> int:
        """How many more messages may be sent now."""
        return UNLIMITED if self.size is None else self.size - self.unacked

    def sent(self, n: int) -> None:
        if self.size is not None:
            self.unacked += n

    def acknowledged(self, n: int) -> bool:
        """The app read ``n`` more messages; returns whether that made room.

        Raises:
            InvalidRequestError: ``n`` is more than was sent and not acknowledged
                (nothing changes).
        """
        if self.size is None:
            raise InvalidRequestError("read", "this stream has no window to acknowledge")
        if n > self.unacked:
            raise InvalidRequestError(
                "read", f"{n} exceeds the {self.unacked} messages sent and not acknowledged"
            )
        was_full = self.unacked >= self.size
        self.unacked -= n
        return was_full and n > 0


class AppStream:
    """One open stream of one app: its doorbell, its window, why it ended."""

    __slots__ = (
        "app",
        "bytes_sent",
        "doorbell",
        "effective",
        "end_reason",
        "error",
        "task",
        "window",
    )

    def __init__(self, app: str, window: int | None = None) -> None:
        self.app = app
        self.doorbell = asyncio.Event()
        """Set by the ESS when events arrive, by an acknowledgement that makes
        room, and when the stream ends."""
        self.window = Window(window)
        self.end_reason: EndReason | None = None
        self.error: Exception | None = None
        """With :attr:`EndReason.FAILED`: the app's protocol error."""
        self.bytes_sent = 0
        """Bytes of event batches written to the stream (serialized sizes)."""
        self.task = asyncio.current_task()
        self.effective: tuple[QueueConfig, QueueConfig, QueueConfig] | None = None

    def acknowledge(self, n: int) -> None:
        """The app read ``n`` messages (raises as :meth:`Window.acknowledged`)."""
        if self.window.acknowledged(n):
            self.doorbell.set()

    def finish(self, reason: EndReason, error: Exception | None = None) -> None:
        """End the stream now for ``reason`` (the first reason given stands).

        The stream's task is cancelled: it may be blocked writing to an app that
        stopped reading.
        """
        if self.end_reason is not None:
            return
        self.end_reason = reason
        self.error = error
        self.doorbell.set()
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()

    def replace(self) -> None:
        self.finish(EndReason.REPLACED)

    def end(self) -> None:
        self.finish(EndReason.SHUTDOWN)

    def expire(self) -> None:
        self.finish(EndReason.EXPIRED)


class Session:
    """An open stream as its API serves it: the events to write, and what was written."""

    __slots__ = ("_journal", "_pace", "_slow_apps", "batch_max", "ess", "stream")

    def __init__(
        self,
        stream: AppStream,
        ess: EventSubSystem,
        batch_max: int,
        journal: Journal | None,
        slow_apps: SlowAppWatch,
        pace: WritePace,
    ) -> None:
        self.stream = stream
        self.ess = ess
        self.batch_max = batch_max
        self._journal = journal if journal is not None and journal.full else None
        self._slow_apps = slow_apps
        self._pace = pace

    @property
    def app(self) -> str:
        return self.stream.app

    async def batches(self) -> AsyncIterator[list[RawEvent]]:
        """The delivery loop: each drained batch (``drain_raw``: a data event is the
        plain tuple of its fields), until the middleware ends the stream.

        The caller writes each batch before asking for the next (and counts the
        messages it wrote in the window with ``stream.window.sent``); the batch
        is then journaled as delivered. Ends when :attr:`AppStream.end_reason`
        is set between two batches; ``CancelledError`` when it is set during a
        write, or when the peer goes away.
        """
        ess = self.ess
        stream = self.stream
        app = stream.app
        batch_max = self.batch_max
        journal = self._journal
        slow_apps = self._slow_apps
        window = stream.window
        doorbell = stream.doorbell
        turn = self._pace.turn
        while stream.end_reason is None:
            doorbell.clear()
            if window.room() <= 0 or not ess.pending(app):
                await doorbell.wait()
                # Let what is ready run first (the provider's next messages, other
                # apps' writes): under load the next drain then takes a larger batch,
                # so the per-message cost of a write is paid for more events. Idle,
                # it costs one turn of the loop.
                await asyncio.sleep(0)
                continue
            wait = turn()
            if wait:
                # Beyond the process's budget of writes (vehicle_middleware.server.pacing): this
                # write waits for its turn, and its queues collect more meanwhile.
                await asyncio.sleep(wait)
                if not ess.pending(app):
                    continue  # deregistered meanwhile, or the stream ended
            events = ess.drain_raw(app, batch_max)
            yield events
            if journal is not None:
                # Only an app whose queues took a filtered event has rows to look into.
                record_delivered(journal, app, events, several=ess.multi_write_pushes(app) > 0)
            # Drops are reported per episode by the SlowAppWatch (also while this
            # loop is blocked on a reader that stopped); during one it needs to
            # know when the app has read everything queued.
            if slow_apps.in_episode(app) and not ess.pending(app):
                slow_apps.drained(app)


class Streams:
    """Every app's open stream: one per app, a newer one replaces the older.

    When an app's current stream ends the app is removed from the ESS (after
    the grace period, if one is configured). Everything runs on one asyncio loop.
    """

    def __init__(
        self,
        settings: StreamSettings,
        ess: EventSubSystem,
        read_policy: StreamReadPolicy,
        stream_counts: StreamCounts,
        record: Record,
        journal: Journal | None,
        slow_apps: SlowAppWatch,
    ) -> None:
        self._settings = settings
        self._pace = WritePace(settings.stream_writes_per_s)
        """One budget of stream writes for every app's stream."""
        self._ess = ess
        self._read_policy = read_policy
        self._stream_counts = stream_counts
        self._record = record
        self._journal = journal
        self._slow_apps = slow_apps
        self._streams: dict[str, AppStream] = {}
        self._apps_of: dict[str, set[str]] = {}
        """Each app's streams: its own, and its KUKSA subscriptions' (one app of limits)."""
        self._expiry: dict[str, asyncio.TimerHandle] = {}
        self._closing = False

    def __contains__(self, app: str) -> bool:
        """Whether the app has an open stream now."""
        return app in self._streams

    def __len__(self) -> int:
        return len(self._streams)

    def get(self, app: str) -> AppStream | None:
        """The app's open stream, if it has one."""
        return self._streams.get(app)

    def streams_of(self, owner: str) -> set[str]:
        """The ESS apps of ``owner``'s open streams (its own, its KUKSA subscriptions)."""
        return set(self._apps_of.get(owner, ()))

    def subscriptions_held(self, owner: str, *, besides: str | None = None) -> int:
        """The subscriptions ``owner`` holds on its streams (one app, one limit),
        not counting the ESS app ``besides``."""
        count = self._ess.subscriptions_of
        return sum(count(a) for a in self._apps_of.get(owner, ()) if a != besides)

    @asynccontextmanager
    async def session(
        self,
        who: Caller,
        queues: Sequence[QueueConfig],
        *,
        app: str | None = None,
        window: int | None = None,
    ) -> AsyncIterator[Session]:
        """Open a stream for ``who`` (as ``app``, default its own id) and run it.

        Inside: the stream is open, counted among the app's open streams, and
        ends when the caller's token expires. On the way out it closes; if the
        middleware ended it (replaced, token expired, shutting down, protocol
        error) :class:`StreamEndedError` says why, whatever the body was doing.

        Raises:
            InvalidQueueConfigError, BudgetExceededError: nothing opened.
            LimitExceededError: a new app beyond the apps-with-streams limit.
            StreamEndedError: the middleware ended the stream.
        """
        name = app or who.app
        stream = self.open(name, queues, who.grants, window=window, pooled=who.pooled)
        self._stream_counts.opened(name)
        on_expiry(stream.expire)  # the token's expiry ends it with its reason
        session = Session(
            stream,
            self._ess,
            self._settings.batch_max,
            self._journal,
            self._slow_apps,
            self._pace,
        )
        try:
            try:
                yield session
            except asyncio.CancelledError:
                if stream.end_reason is None:
                    raise  # the peer went away (or the server is cancelling the call)
        finally:
            self._stream_counts.closed(name)
            self.close(stream)
        if stream.end_reason is not None:
            raise StreamEndedError(stream.end_reason, who.app, stream.error)

    def open(
        self,
        app: str,
        queues: Sequence[QueueConfig],
        grants: Grants = ALL,
        *,
        window: int | None = None,
        pooled: bool = False,
    ) -> AppStream:
        """Open the app's stream, replacing an older one; configure its queues.

        Replacing an open stream starts the app anew (``open_stream``'s
        ``fresh``): the older stream's subscriptions, queued events and seq
        counters go. State kept after a stream ended (the grace period) is
        resumed.

        ``window``: events sent and not acknowledged, at most (None: no window).
        ``pooled``: the app is an identity clients share (:attr:`Caller.pooled`),
        held to the middleware-wide limits only.

        Raises:
            InvalidQueueConfigError, BudgetExceededError: nothing changes.
            LimitExceededError: a new app beyond the apps-with-streams limit.
        """
        self._admit(app, queues, pooled=pooled)
        owner = owner_of(app)
        stream = AppStream(app, window)
        # A live stream being replaced belongs to another client of the app (or to
        # this one, reconnecting before the middleware noticed): the new stream
        # starts anew, so it never gets events of subscriptions it did not make,
        # nor seq gaps it did not suffer. State kept after a stream ended (the
        # grace period) is resumed instead: that is what the grace is for.
        replacing = app in self._streams
        stream.effective = self._ess.open_stream(
            app, queues, wake=stream.doorbell.set, fresh=replacing
        )
        # What the app may read is what this stream's token allows; subscriptions
        # kept from an earlier stream (another token) must pass it too.
        policy = self._read_policy
        policy.stream_grants(app, grants)
        denied = [s.key for s in self._ess.subscriptions(app) if not policy.may_read(app, s.key)]
        if denied:
            self._ess.deregister(app, denied, check_policy=False)
            log.info(
                "app %s: %d subscriptions ended: its new token may not read them", app, len(denied)
            )
        timer = self._expiry.pop(app, None)
        if timer is not None:
            timer.cancel()
        old = self._streams.get(app)
        self._streams[app] = stream
        self._apps_of.setdefault(owner, set()).add(app)
        self._record(
            Kind.CONNECT,
            app=app,
            stream="events",
            details={
                "queues": [[c.queue, c.min_length, c.max_length] for c in stream.effective],
                "replaces": old is not None,
            },
        )
        if old is not None:
            old.replace()
            log.info(
                "app %s: a new stream replaces the previous one and starts anew "
                "(the previous one's subscriptions ended)",
                app,
            )
        else:
            log.info("app %s: stream opened", app)
        return stream

    def _admit(self, app: str, queues: Sequence[QueueConfig], *, pooled: bool = False) -> None:
        """Refuse a stream beyond one of the shares of the event path: the apps with
        streams, the app's stream slots, its share of the event budget.

        Each app's share is counted over its own stream and its KUKSA subscriptions
        alike; a stream that replaces the app's own gives its slot and its
        reservation back. Counted at admission only: delivery never looks. A
        ``pooled`` app (clients the middleware cannot tell apart) has no share of
        its own: the apps-with-streams limit and the event budget bound it.

        Raises:
            InvalidQueueConfigError: a bad queue configuration.
            LimitExceededError: naming the share, the app's use and the limit.
        """
        settings = self._settings
        owner = owner_of(app)
        mine = self._apps_of.get(owner)
        if mine is None and len(self._apps_of) >= settings.max_apps:
            raise LimitExceededError(
                "apps with open streams",
                settings.max_apps,
                f"{len(self._apps_of)} apps have one open",
            )
        if pooled:
            return
        ess = self._ess
        others = [a for a in mine or () if a != app]
        slots = settings.max_streams_per_app
        if len(others) + 1 > slots:
            raise LimitExceededError(
                "event streams per app",
                slots,
                f"app {owner!r} holds {len(others)} (its own stream and its KUKSA "
                "subscriptions); end one first",
            )
        share = settings.event_budget_per_app
        used = sum(ess.reservation(a) for a in others)
        need = sum(c.min_length for c in effective_queue_configs(queues))
        if used + need > share:
            raise LimitExceededError(
                "event budget per app",
                share,
                f"app {owner!r} reserves {used} queued events on its other streams and "
                f"asks for {need} more (the sum of its queues' min_length)",
            )

    def close(self, stream: AppStream) -> None:
        """The stream ended. If it was the app's current one, the app goes (now or after grace)."""
        reason = stream.end_reason or EndReason.CLOSED
        self._record(Kind.DISCONNECT, app=stream.app, stream="events", reason=reason.value)
        if self._streams.get(stream.app) is not stream:
            return  # replaced: the newer stream owns the app's state
        del self._streams[stream.app]
        mine = self._apps_of[owner_of(stream.app)]
        mine.discard(stream.app)
        if not mine:
            del self._apps_of[owner_of(stream.app)]
        grace = self._settings.grace_period_s
        # A KUKSA subscription's app is never opened again: nothing to keep it for.
        if grace > 0 and not self._closing and owner_of(stream.app) == stream.app:
            loop = asyncio.get_running_loop()
            self._expiry[stream.app] = loop.call_later(grace, self._expire, stream.app)
            log.info("app %s: stream ended; state kept for %.1f s", stream.app, grace)
        else:
            self._remove(stream.app)

    def _expire(self, app: str) -> None:
        self._expiry.pop(app, None)
        if app not in self._streams:
            self._remove(app)

    def _remove(self, app: str) -> None:
        subs = self._ess.subscriptions_of(app)
        self._ess.remove_app(app)
        self._read_policy.stream_grants(app, None)
        log.info("app %s: stream ended; removed it and its %d subscriptions", app, subs)

    def begin_shutdown(self) -> None:
        """End every stream now, with no grace timers (the process is stopping)."""
        self._closing = True
        for stream in list(self._streams.values()):
            stream.end()

    def shutdown(self) -> None:
        """Forget every app (the process is stopping)."""
        self._closing = True
        for timer in self._expiry.values():
            timer.cancel()
        self._expiry.clear()
        for app in self._ess.apps():
            self._ess.remove_app(app)
