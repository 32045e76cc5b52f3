"""What every sample app shares: subscribing by prefix, counting, stopping.

An app subscribes to the keys under its prefixes that exist when it starts,
and to every key added later under them (from ``KeyAdded`` events), on one
queue with one trigger. :class:`AppStats` counts what it received and what it
saw missing (seq gaps, per key and per queue). :func:`run_app` runs the read
loop until SIGINT/SIGTERM or a duration, then *drains*: it keeps reading at
full speed until nothing arrived for 0.5 s, so that when it exits it has
read everything the middleware sent it, and its counts can be compared with
the middleware's journal. While data keeps flowing it never goes idle, so
the drain ends after 2 s at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from vehicle_middleware.sdk import (
    AppClient,
    ClientEvent,
    DataEvent,
    KeyAddedEvent,
    KeyFreshEvent,
    KeyStaleEvent,
    ProviderBackEvent,
    ProviderGoneEvent,
    QueueSpec,
    ReconnectedEvent,
    ResyncEvent,
    Sub,
    Tls,
)
from vehicle_middleware.sdk.status_file import write_periodically

__all__ = ["AppOptions", "AppStats", "Consumer", "PrefixSubscriber", "run_app"]

log = logging.getLogger(__name__)

MAX_NAMES: Final = 1000
"""Subscriptions per Register call (the middleware's default request limit)."""


@dataclass(frozen=True, slots=True)
class AppOptions:
    target: str
    app_id: str
    prefixes: tuple[str, ...] = ("Vehicle.",)
    keys: tuple[str, ...] = ()
    queue: int = 0
    queue_length: tuple[int, int] | None = None
    """(min, max) asked for the queue; None: the middleware's defaults."""
    on_update: bool = True
    """An event for every write (heartbeats included), not only for changes."""
    want_current: bool = False
    """Ask for each key's current value when subscribing (see ``on_current``)."""
    token: str | None = None
    tls: Tls | None = None
    """TLS to a middleware serving it (with a client certificate: mutual TLS)."""
    channel_options: tuple[tuple[str, Any], ...] = ()
    """More gRPC channel arguments for the app's connection."""
    status: Path | None = None
    duration: float | None = None
    drain_idle: float = 0.5
    """On stop, read on until nothing arrived for this long..."""
    drain_limit: float = 2.0
    """...but for at most this long: while data flows, it never goes idle."""


@dataclass(slots=True)
class _KeyCount:
    received: int = 0
    missed: int = 0
    last_seq: int = 0


@dataclass(slots=True)
class AppStats:
    """What an app received and saw missing; ``snapshot()`` is its status file."""

    app: str
    state: str = "starting"
    received: int = 0
    """Data events."""
    missed: int = 0
    """Events the seq numbers say the app did not get."""
    batches: int = 0
    reconnects: int = 0
    restarts: int = 0
    """Reconnections to a new middleware process."""
    resyncs: int = 0
    subscribed: int = 0
    stale: set[str] = field(default_factory=set)
    """Keys the middleware said are stale (KeyStale) and not fresh again since."""
    went_stale: set[str] = field(default_factory=set)
    """Every key it said went stale while the app ran."""
    stale_events: int = 0
    fresh_events: int = 0
    no_provider: dict[str, str] = field(default_factory=dict)
    """Keys whose provider went away (ProviderGone, not back since) -> that provider."""
    providers_gone: dict[str, int] = field(default_factory=dict)
    """ProviderGone events by provider: how many keys each took away."""
    per_key: dict[str, _KeyCount] = field(default_factory=dict)
    per_queue: dict[int, _KeyCount] = field(default_factory=dict)
    started_ns: int = field(default_factory=time.time_ns)

    def count(self, batch: Sequence[ClientEvent]) -> None:
        self.batches += 1
        for e in batch:
            if isinstance(e, DataEvent):
                self.received += 1
                self.missed += e.missed
                k = self.per_key.setdefault(e.name or f"#{e.key}", _KeyCount())
                k.received += 1
                k.missed += e.missed
                k.last_seq = e.seq
                q = self.per_queue.setdefault(e.queue, _KeyCount())
                q.received += 1
                q.missed += e.missed
            elif isinstance(e, ReconnectedEvent):
                self.reconnects += 1
                self.restarts += e.middleware_restarted
                if e.middleware_restarted:  # a new process: what the old one said is moot
                    self.stale.clear()
                    self.no_provider.clear()
                for r in e.results:  # the register results say which keys have no provider
                    if r.no_provider:
                        self.no_provider.setdefault(r.key, "?")
                    else:
                        self.no_provider.pop(r.key, None)
            elif isinstance(e, ResyncEvent):
                self.resyncs += 1
                self.stale.clear()  # still stale keys are told again after a resync
            elif isinstance(e, KeyStaleEvent):
                name = e.name or f"#{e.key}"
                self.stale_events += 1
                self.stale.add(name)
                self.went_stale.add(name)
            elif isinstance(e, KeyFreshEvent):
                self.fresh_events += 1
                self.stale.discard(e.name or f"#{e.key}")
            elif isinstance(e, ProviderGoneEvent | ProviderBackEvent):
                gone = isinstance(e, ProviderGoneEvent)
                if gone:
                    self.providers_gone[e.provider] = self.providers_gone.get(e.provider, 0) + len(
                        e.keys
                    )
                for key, known in zip(e.keys, e.names, strict=True):
                    if gone:
                        self.no_provider[known or f"#{key}"] = e.provider
                    else:
                        self.no_provider.pop(known or f"#{key}", None)

    def snapshot(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "state": self.state,
            "received": self.received,
            "missed": self.missed,
            "batches": self.batches,
            "reconnects": self.reconnects,
            "restarts": self.restarts,
            "resyncs": self.resyncs,
            "subscribed": self.subscribed,
            "stale": sorted(self.stale),
            "went_stale": sorted(self.went_stale),
            "stale_events": self.stale_events,
            "fresh_events": self.fresh_events,
            "no_provider": dict(sorted(self.no_provider.items())),
            "providers_gone": dict(sorted(self.providers_gone.items())),
            "started_ns": self.started_ns,
            "per_queue": {
                str(q): {"received": c.received, "missed": c.missed}
                for q, c in sorted(self.per_queue.items())
            },
            "per_key": {
                k: {"received": c.received, "missed": c.missed, "last_seq": c.last_seq}
                for k, c in sorted(self.per_key.items())
            },
        }


class PrefixSubscriber:
    """Keeps an app subscribed to every key under its prefixes (and its exact keys)."""

    def __init__(
        self,
        client: AppClient,
        options: AppOptions,
        on_current: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self._client = client
        self._options = options
        self._on_current = on_current
        self.subscribed: set[str] = set()

    def wants(self, name: str) -> bool:
        return name in self._options.keys or any(name.startswith(p) for p in self._options.prefixes)

    async def start(self) -> int:
        """Subscribe to what exists now; returns how many keys."""
        names: set[str] = set(self._options.keys)
        for prefix in self._options.prefixes:
            names.update(await self._client.list_keys(prefix))
        await self._subscribe(sorted(names))
        return len(self.subscribed)

    async def handle(self, batch: Sequence[ClientEvent]) -> None:
        """Subscribe to keys the batch says were added under the prefixes."""
        added = [
            e.name
            for e in batch
            if isinstance(e, KeyAddedEvent) and e.name not in self.subscribed and self.wants(e.name)
        ]
        if added:
            await self._subscribe(added)

    async def _subscribe(self, names: Sequence[str]) -> None:
        o = self._options
        for i in range(0, len(names), MAX_NAMES):
            chunk = names[i : i + MAX_NAMES]
            results = await self._client.subscribe(
                [
                    Sub(n, queue=o.queue, on_update=o.on_update, want_current=o.want_current)
                    for n in chunk
                ]
            )
            for r in results:
                if r.ok:
                    self.subscribed.add(r.key)
                    if r.current is not None and self._on_current is not None:
                        self._on_current(r.key, r.current)
                elif r.key in o.keys:
                    log.warning("cannot subscribe to %s: %s %s", r.key, r.status, r.detail)


Consumer = Callable[[Sequence[ClientEvent]], Awaitable[None]]
"""What an app does with each batch it reads."""


async def run_app(
    options: AppOptions,
    consume: Consumer,
    *,
    pace: float = 0.0,
    stats: AppStats | None = None,
    ready: Callable[[AppClient], None] | None = None,
    on_current: Callable[[str, bytes], None] | None = None,
    stop: asyncio.Event | None = None,
) -> AppStats:
    """Connect, subscribe, read batches into ``consume`` until stopped, drain, return the counts.

    Args:
        pace: seconds to wait after each batch (a slow reader); not while draining.
        stats: counts to update (e.g. shared with a display); a new one by default.
        ready: called once subscribed.
        on_current: given the current value of each key subscribed to
            (with ``options.want_current``).
        stop: set it to stop the app (then it drains); by default SIGINT and
            SIGTERM stop it.
    """
    stats = stats or AppStats(options.app_id)
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    finished = asyncio.Event()  # the status writer's stop
    writer = asyncio.create_task(write_periodically(options.status, stats.snapshot, finished))
    queues = []
    if options.queue_length is not None:
        queues = [QueueSpec(options.queue, *options.queue_length)]
    client = AppClient(
        options.target,
        options.app_id,
        queues=queues,
        token=options.token,
        channel_options=options.channel_options,
        tls=options.tls,
    )
    draining = asyncio.Event()  # also ends a slow reader's pause at once
    last_read = time.monotonic()

    async def read() -> None:
        nonlocal last_read
        async for batch in client.batches():
            last_read = time.monotonic()
            stats.count(batch)
            await subscriber.handle(batch)
            await consume(batch)
            if pace and not draining.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(draining.wait(), pace)

    try:
        # Never wait for a middleware longer than the app was asked to run.
        await client.connect(timeout=min(30.0, options.duration or 30.0))
        subscriber = PrefixSubscriber(client, options, on_current)
        stats.subscribed = await subscriber.start()
        stats.state = "reading"
        log.info("%s: subscribed to %d keys", options.app_id, stats.subscribed)
        if ready is not None:
            ready(client)
        reader = asyncio.create_task(read())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_first(stop, reader), options.duration)
        if not reader.done():
            draining.set()
            stats.state = "draining"
            deadline = time.monotonic() + options.drain_limit
            last_read = time.monotonic()
            while time.monotonic() - last_read < options.drain_idle:
                if time.monotonic() >= deadline:
                    log.info(
                        "%s: stopped reading after %.1f s: events still arrive",
                        options.app_id,
                        options.drain_limit,
                    )
                    break
                await asyncio.sleep(0.05)
        stats.subscribed = len(subscriber.subscribed)
        await client.close()
        with contextlib.suppress(asyncio.CancelledError):
            await reader  # ends once closed; raises what the loop raised
        stats.state = "stopped"
    finally:
        if stats.state != "stopped":
            stats.state = "failed"
        await client.close()
        finished.set()
        await writer
    return stats


async def _first(stop: asyncio.Event, reader: asyncio.Task[None]) -> None:
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if reader.done():
        reader.result()  # the stream failed for good: raise it
