"""One Follow stream: the push form of the journal's delivery (docs/design.md,
"The journal's consumers").

The consumer says where it starts (the record it holds last) and what it
wants; the session sends *groups* of records as the journal writes them: at
once when idle (no timer), bigger under load (each group is whatever was
written since the last one, up to ``max_records``). Each group has a sequence
number from 0.

- A reliable consumer (registered) gets every group, numbered with no gap,
  including recovery answers as groups; at most ``window`` groups wait for its
  acknowledgement, and only acknowledged groups release their records (its
  position moves; retention may then remove them). A stream that breaks sends
  nothing twice the consumer acknowledged: the next Follow starts where the
  consumer says.
- A live consumer (``LIVE``) pins nothing and acknowledges nothing; when it
  falls behind the in-memory history the session skips to the newest records
  and the sequence number jumps by the groups skipped (a gap per skipped
  group). It never reads disk.

No gRPC here: the servicer passes ``send`` and the acknowledgements in.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from vehicle_middleware.contract.journal.chain import distance, pred
from vehicle_middleware.server.errors import (
    FollowReplacedError,
    InvalidRequestError,
    UnavailableError,
)
from vehicle_middleware.server.journal.consumers import Consumer
from vehicle_middleware.server.journal.feed import Feed, Records
from vehicle_middleware.server.journal.poll_answers import Nothing, Recover

__all__ = ["FollowSession", "Group"]


@dataclass(frozen=True, slots=True)
class Group:
    """One message of a Follow stream."""

    seq: int
    answer: Records | Recover


class FollowSession:
    """Sends one consumer's groups; see the module docstring."""

    def __init__(
        self,
        feed: Feed,
        app: str,
        consumer: Consumer | None,
        *,
        boot_id: str,
        offset: int,
        want: frozenset[str] | None,
        max_records: int,
        window: int,
    ) -> None:
        self._feed = feed
        self.app = app
        self.consumer = consumer
        self._boot = boot_id
        self._offset = offset
        self._want = want
        self._max = max_records
        self._window = window
        self._seq = 0
        self._inflight: deque[tuple[int, tuple[str, int]]] = deque()  # (seq, position after)
        self._skipped: tuple[str, int] | None = None  # filtered-out records read past, unsent
        self._error: BaseException | None = None
        self._event: asyncio.Event | None = None
        self._task: asyncio.Task[Any] | None = None
        self.sent = 0
        self.sending = False
        """A group is being written (held there by flow control while the consumer
        does not read)."""
        """Groups sent."""

    @property
    def live(self) -> bool:
        return self.consumer is None

    async def ack(self, seq: int) -> None:
        """The consumer stored every group up to ``seq``: release their records.

        Acknowledging a group again is harmless; a live consumer's acks are ignored.

        Raises:
            InvalidRequestError: ``seq`` was not sent yet.
        """
        if self.consumer is None:
            return
        if seq >= self._seq:
            raise InvalidRequestError(
                "ack.seq",
                f"group {seq} was not sent yet (the last sent is "
                f"{self._seq - 1 if self._seq else 'none'})",
            )
        position: tuple[str, int] | None = None
        while self._inflight and self._inflight[0][0] <= seq:
            position = self._inflight.popleft()[1]
        if not self._inflight and self._skipped is not None:
            position, self._skipped = self._skipped, None
        if position is not None:
            self._refresh()
            await self._feed.acknowledge(self.consumer, *position)
        self._wake()

    @property
    def error(self) -> BaseException | None:
        """Why the session was ended (:meth:`fail`): the first reason given stands."""
        return self._error

    def fail(self, error: BaseException) -> None:
        """End the session with ``error`` (a bad acknowledgement, a newer stream, its
        consumer unregistered). The first reason given stands.

        The task running :meth:`run` is cancelled: it may be blocked writing to a
        consumer that stopped reading (flow control), where no wake-up reaches it.
        That task then raises ``CancelledError``; its caller reports :attr:`error`.
        """
        if self._error is not None:
            return
        self._error = error
        self._wake()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    def replace(self) -> None:
        """A newer Follow of the same consumer took over."""
        assert self.consumer is not None
        self.fail(
            FollowReplacedError(
                f"a newer Follow of consumer {self.consumer.component!r} of app "
                f"{self.app!r} replaced this one"
            )
        )

    def _wake(self) -> None:
        if self._event is not None:
            self._event.set()

    def _refresh(self) -> None:
        assert self.consumer is not None
        fresh = self._feed.consumers.get(self.consumer.app, self.consumer.component)
        if fresh is not None:
            self.consumer = fresh

    async def run(self, send: Callable[[Group], Awaitable[None]]) -> None:
        """Send groups until the stream ends (cancelled), fails (raises the error, or is
        cancelled by :meth:`fail` while it waits: then :attr:`error` says why), or the
        journal is closed (:meth:`Feed.end`) and every group sent is acknowledged
        (returns)."""
        feed = self._feed
        self._task = asyncio.current_task()
        self._event = event = feed.waiter()
        try:
            if self._error is not None:
                raise self._error
            if self.consumer is not None:
                # Where it starts is what it holds: that acknowledges everything before,
                # when it is a position held (as Poll). One not held (a new consumer's
                # ("", 0), a restart, a bogus offset) acknowledges nothing: the
                # recovery group does, once the consumer acknowledges it.
                await feed.acknowledge_held(self.consumer, self._boot, self._offset)
            else:
                holds = self._offset if self._boot or self._offset else None
                self._offset = feed.live_start(holds, 0)
                self._boot = feed.boot_id
            while True:
                if self._error is not None:
                    raise self._error
                event.clear()
                if self.consumer is not None and len(self._inflight) >= self._window:
                    await event.wait()
                    continue
                feed.arm()
                group = await (
                    self._next_live() if self.consumer is None else self._next_reliable()
                )
                if group is None:
                    if feed.ended and not self._inflight:
                        return  # the journal's last record is sent and acknowledged
                    await event.wait()
                    continue
                self.sending = True
                try:
                    await send(group)
                finally:
                    self.sending = False
                self.sent += 1
        finally:
            feed.forget(event)
            self._task = None

    async def _next_reliable(self) -> Group | None:
        assert self.consumer is not None
        while True:
            self._refresh()
            try:
                a = await self._feed.poll(
                    self.consumer,
                    self._boot,
                    self._offset,
                    max_records=self._max,
                    want=self._want,
                    acknowledge=False,
                )
            except UnavailableError:
                return None  # nothing written yet: wait for the first record
            if isinstance(a, Nothing):
                return None
            if isinstance(a, Recover):
                self._boot, self._offset = a.boot_id, pred(a.n0)
            else:
                self._boot, self._offset = a.boot_id, a.last_offset
                if not a.lines:  # everything read was filtered out: counts as delivered
                    self._skipped = (self._boot, self._offset)
                    if not self._inflight:
                        await self._feed.acknowledge(self.consumer, *self._skipped)
                        self._skipped = None
                    if a.caught_up:
                        return None
                    continue
            self._skipped = None
            group = Group(self._seq, a)
            self._inflight.append((self._seq, (self._boot, self._offset)))
            self._seq += 1
            return group

    async def _next_live(self) -> Group | None:
        feed = self._feed
        while True:
            start = feed.live_start(self._offset, self._max)
            if start != self._offset:
                skipped = distance(self._offset, start)
                self._seq += max(1, math.ceil(skipped / self._max))  # a gap per skipped group
                self._offset = start
            try:
                a = await feed.poll(
                    None, feed.boot_id, self._offset, max_records=self._max, want=self._want
                )
            except UnavailableError:
                return None  # nothing written yet
            if isinstance(a, Nothing):
                return None
            if isinstance(a, Recover):
                continue  # the history moved on meanwhile: skip again
            self._offset = a.last_offset
            if not a.lines:
                if a.caught_up:
                    return None
                continue
            group = Group(self._seq, a)
            self._seq += 1
            return group
