"""An app's open event stream and the loop that delivers its events.

This is where the ESS meets a transport: :class:`AppStream` is one open stream
of one app (its doorbell, its window, why it ended), and :func:`deliver` is the
loop every event stream runs (``GetEvents``, ``Events``): wait for the doorbell
and for room in the window, drain up to ``batch_max`` events, write them, journal
them.

Back-pressure lands in the ESS queues, not in transport buffers: on an
``Events`` stream the middleware keeps at most ``window`` messages (batches)
sent and not acknowledged by the app; while the window is full nothing is
drained, the app's queues fill, and the drop rule keeps the latest value of each
key (seq shows the loss). So what an app lags behind is bounded by its queues
plus its window of batches. The window counts batches, not events: a slow
reader then gets fewer, larger batches made when it acknowledges, of the values
queued at that time, instead of a trickle of small stale ones.
``GetEvents`` (no acknowledgements) has no window: there only gRPC flow control
holds the writer back, and the transport buffers add to the lag.

What ``delivered`` means (the journal's ``delivered_batch``): the batch was
written to the app's stream. On ``Events``, the app has then read it, or is at
most ``window`` batches behind it.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from vmw.ess import QueueConfig
from vmw.proto.ess.v1 import ess_pb2
from vmw.server.errors import InvalidRequestError
from vmw.server.journal.taps import record_delivered
from vmw.server.rpc import convert

if TYPE_CHECKING:
    from vmw.server.runtime import Runtime

__all__ = ["AppStream", "EndReason", "Window", "deliver"]

UNLIMITED: Final = 1 << 62
"""The room of a stream without a window."""


class EndReason(enum.Enum):
    """Why the middleware ended a stream (the peer going away is not one: the
    stream's task is just cancelled)."""

    REPLACED = "replaced"
    """A newer stream of the same app took over."""
    EXPIRED = "token expired"
    """The app's token expired."""
    SHUTDOWN = "shutdown"
    """The middleware is shutting down."""
    FAILED = "failed"
    """The app broke the stream's protocol (:attr:`AppStream.error` says how)."""


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
    """One open event stream of one app."""

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


async def deliver(
    runtime: Runtime,
    stream: AppStream,
    write: Callable[[ess_pb2.EventBatch], Awaitable[object]],
) -> None:
    """Write the app's events to its stream until the middleware ends it.

    Returns when :attr:`AppStream.end_reason` is set between two writes; raises
    ``CancelledError`` when it is set during one, or when the peer goes away.
    """
    ess = runtime.ess
    app = stream.app
    batch_max = runtime.settings.batch_max
    max_bytes = runtime.settings.max_message_bytes - 1024
    journal = runtime.journal if runtime.journal is not None and runtime.journal.full else None
    slow_apps = runtime.slow_apps
    window = stream.window
    doorbell = stream.doorbell
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
        events = ess.drain(app, batch_max)
        batch = convert.event_batch(events)
        size = batch.ByteSize()
        if size <= max_bytes:
            window.sent(1)
            await write(batch)
        else:
            parts = convert.split_to_fit(batch, max_bytes)
            window.sent(len(parts))
            for part in parts:
                await write(part)
        stream.bytes_sent += size
        if journal is not None:
            record_delivered(journal, app, events)
        # Drops are reported per episode by the runtime's SlowAppWatch (also while
        # this loop is blocked on a reader that stopped); during one it needs to
        # know when the app has read everything queued.
        if slow_apps.in_episode(app) and not ess.pending(app):
            slow_apps.drained(app)
