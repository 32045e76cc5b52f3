"""The app SDK: open the event stream, subscribe, receive typed events.

    async with AppClient("127.0.0.1:50051", "dashboard") as app:
        await app.subscribe([Sub("Vehicle.Speed", want_current=True)])
        async for event in app.events():
            ...

The client keeps the id -> name map (from register results and
``KeyAdded``/``KeyRemoved``), counts seq gaps per key (``DataEvent.missed``),
and, when the stream fails or the middleware restarts, reconnects with backoff
and registers every subscription again by itself (the crash rule of
the ESS in docs/design.md), yielding a :class:`ReconnectedEvent` so the app knows to refresh its
state. A subscription whose key does not exist yet (not added so far, or not
re-added after a restart) is registered when its ``KeyAdded`` arrives.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final

import grpc
from vehicle_middleware.contract.channel import (
    RETRYABLE,
    Backoff,
    Tls,
    metadata,
    open_channel,
    retry_unary,
)
from vehicle_middleware.contract.wire import REASON_HEADER, REASON_REPLACED, SEQ_CYCLE
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2, actuation_pb2_grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import write_races
from vehicle_middleware.sdk.errors import MiddlewareUnreachableError
from vehicle_middleware.sdk.events import (
    ClientEvent,
    DataEvent,
    KeyAddedEvent,
    KeyFreshEvent,
    KeyRemovedEvent,
    KeyStaleEvent,
    ProviderBackEvent,
    ProviderGoneEvent,
    ReconnectedEvent,
    ResyncEvent,
    SubscriptionResult,
)

__all__ = ["AppClient", "Filter", "QueueSpec", "StreamReplacedError", "Sub"]

log = logging.getLogger(__name__)

_STATUS_NAMES: Final = {v: k.removeprefix("STATUS_") for k, v in ess_pb2.Status.items()}


class StreamReplacedError(Exception):
    """Another client of the same app id opened an event stream, which replaced ours."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        super().__init__(
            f"another client of app {app_id!r} opened an event stream and replaced this one; "
            "not reconnecting, so that the two do not replace each other forever"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    """What a subscription samples of the writes its trigger selects (the middleware
    applies it: ``Filter`` in ``ess.proto``). Every part is optional.

    Attributes:
        min_interval: at most one event per this many seconds (1 ms to 1 h); the
            latest value wins: a write within the interval is held and delivered
            when it ends.
        threshold: an event only when the numeric value moved by at least this
            much since the last event (> 0).
        range: ``(lo, hi)``: an event only when the numeric value enters or leaves
            ``[lo, hi]``.

    Each :class:`~vehicle_middleware.sdk.events.DataEvent` says how many writes it
    stands for (``writes``). A filter outside these rules, or a threshold or range
    on a key that is not numeric, is refused in the key's result
    (``INVALID_ARGUMENT``, with a detail naming the field).
    """

    min_interval: float | None = None
    threshold: float | None = None
    range: tuple[float, float] | None = None

    def to_pb(self) -> ess_pb2.Filter:
        pb = ess_pb2.Filter()
        if self.min_interval is not None:
            pb.min_interval_ms = max(0, round(self.min_interval * 1000))
        if self.threshold is not None:
            pb.threshold = self.threshold
        if self.range is not None:
            pb.range.lo, pb.range.hi = self.range
        return pb

    @classmethod
    def of_pb(cls, pb: ess_pb2.Filter) -> Filter | None:
        """The filter a ``SubscriptionInfo`` reports (None: no filter)."""
        if not pb.ListFields():
            return None
        return cls(
            min_interval=pb.min_interval_ms / 1000 if pb.HasField("min_interval_ms") else None,
            threshold=pb.threshold if pb.HasField("threshold") else None,
            range=(pb.range.lo, pb.range.hi) if pb.HasField("range") else None,
        )


@dataclass(frozen=True, slots=True)
class Sub:
    """A subscription the app wants."""

    key: str
    queue: int = 0
    on_update: bool = False
    """False: events only when the bytes change; True: on every write."""
    want_current: bool = False
    _: KW_ONLY
    filter: Filter | None = None
    """Fewer events (:class:`Filter`); None: every write the trigger selects."""


@dataclass(frozen=True, slots=True)
class QueueSpec:
    queue: int
    min_length: int
    max_length: int


class AppClient:
    """An app's connection to the middleware's EventService. One stream per client."""

    def __init__(
        self,
        target: str,
        app_id: str,
        *,
        queues: Sequence[QueueSpec] = (),
        reconnect: bool = True,
        on_reconnect: Callable[[ReconnectedEvent], Awaitable[None] | None] | None = None,
        token: str | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        window: int = 0,
        tls: Tls | None = None,
    ) -> None:
        """Args:
        target: the middleware's address, e.g. ``127.0.0.1:50051`` or ``unix:/path``.
        app_id: this app's identity (``app-id`` metadata).
        queues: lengths asked for queues 0..2 (unmentioned ones get the defaults).
        reconnect: reconnect and re-register after failures (else raise).
        on_reconnect: called (and awaited if it returns an awaitable) after
            every reconnection, before the ``ReconnectedEvent`` is yielded: the
            app's cue to refresh its state.
            token: a JWT for a middleware in token mode (sent as a Bearer token).
            channel_options: more gRPC channel arguments (e.g.
                ``("grpc.http2.bdp_probe", 0)`` keeps the receive window at 64 KiB).
            tls: TLS to a middleware that serves it (with a client certificate:
                mutual TLS, where the certificate names this app).
            window: batches the middleware may send ahead of what this app has
                read (0: the middleware's default, 4): the app is never more
                than its queues plus this many batches behind. A slow app that
                wants fresh values asks 1.
        """
        self.app_id = app_id
        self._on_reconnect = on_reconnect
        self._target = target
        self._tls = tls
        self._queues = [
            ess_pb2.QueueConfig(queue=q.queue, min_length=q.min_length, max_length=q.max_length)
            for q in queues
        ]
        self._reconnect_enabled = reconnect
        self._md = metadata(app_id, token)
        self._channel = open_channel(target, channel_options, tls=tls)
        self._events = ess_pb2_grpc.EventServiceStub(self._channel)
        self._vstore = vstore_pb2_grpc.VStoreStub(self._channel)
        self._actuation = actuation_pb2_grpc.ActuationStub(self._channel)
        self._window = window
        self._call: grpc.aio.StreamStreamCall[ess_pb2.EventsRequest, ess_pb2.EventBatch] | None = (
            None
        )
        self._ack_every = 1
        """Acknowledge read batches in groups of this many (half the window)."""
        self._wanted: dict[str, Sub] = {}
        self._waiting: set[str] = set()  # wanted, but the key did not exist at re-registration
        self.names: dict[int, str] = {}
        """Key id -> name of the keys this client knows."""
        self._last_seq: dict[int, int] = {}
        self._backoff = Backoff()
        self._closed = False
        self.boot_id: str | None = None
        self.queue_configs: list[QueueSpec] = []
        self.window = 0
        """The effective window of the stream (from its StreamStarted)."""
        self.missed_total = 0
        """Events lost to this client so far, as seen from seq gaps."""

    async def __aenter__(self) -> AppClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self, *, timeout: float | None = 10.0) -> None:
        """Open the event stream and wait for its StreamStarted.

        Raises:
            grpc.aio.AioRpcError: the middleware refused (e.g. RESOURCE_EXHAUSTED).
            MiddlewareUnreachableError: no middleware answered within ``timeout``
                (a TimeoutError naming the address).
        """
        for attempt in range(1, write_races.ATTEMPTS + 1):
            call = self._events.Events(metadata=self._md, wait_for_ready=True)
            try:
                opening = ess_pb2.OpenEvents(queues=self._queues, window=self._window)
                await asyncio.wait_for(call.write(ess_pb2.EventsRequest(open=opening)), timeout)
                first = await asyncio.wait_for(call.read(), timeout)
            except TimeoutError:
                call.cancel()
                assert timeout is not None
                raise MiddlewareUnreachableError(
                    self._target, timeout, tls=self._tls is not None
                ) from None
            except grpc.aio.AioRpcError as e:
                call.cancel()
                if write_races.write_raced_end(e) and attempt < write_races.ATTEMPTS:
                    continue  # the middleware's answer was lost to grpc's INTERNAL: ask again
                raise
            except BaseException:
                call.cancel()
                raise
            break
        if (
            first is grpc.aio.EOF
            or not first.events
            or first.events[0].WhichOneof("event") != "started"
        ):
            call.cancel()
            raise RuntimeError("the middleware did not start the event stream with StreamStarted")
        started = first.events[0].started
        self.boot_id = started.boot_id
        self.queue_configs = [
            QueueSpec(q.queue, q.min_length, q.max_length) for q in started.queues
        ]
        self.window = started.window
        self._ack_every = max(1, started.window // 2)
        self._call = call

    async def close(self) -> None:
        """End the stream (the middleware then drops this app's state) and the channel."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()
            self._call = None
        await self._channel.close()

    async def subscribe(self, subs: Sequence[Sub]) -> list[SubscriptionResult]:
        """Register subscriptions; remembered for re-registration after a reconnect.

        Returns one result per subscription, in order. A key that does not exist
        yet (``NOT_FOUND``) is registered by the client when it is added: the app
        then gets its ``KeyAddedEvent`` and its data, as if it had subscribed
        after. Refused ones (``PERMISSION_DENIED``, ``INVALID_ARGUMENT``) are not
        remembered.
        """
        results = await self._register(subs)
        known = set(self.names.values())
        late = []
        for sub, result in zip(subs, results, strict=True):
            if result.ok:
                self._wanted[sub.key] = sub
            elif result.status == "NOT_FOUND":
                self._wanted[sub.key] = sub
                if sub.key in known:  # added since the middleware answered
                    late.append(sub)
                else:
                    self._waiting.add(sub.key)  # registered when its KeyAdded arrives
        if late:
            await self._register(late)
        return results

    async def unsubscribe(self, keys: Sequence[str]) -> list[SubscriptionResult]:
        """Deregister subscriptions by key name; idempotent."""
        request = ess_pb2.DeregisterRequest(keys=list(keys))
        response = await retry_unary(
            lambda: self._events.Deregister(request, metadata=self._md), idempotent=True
        )
        for key in keys:
            self._wanted.pop(key, None)
            self._waiting.discard(key)
        results = [self._result(r) for r in response.results]
        for r in results:
            self._last_seq.pop(r.key_id, None)  # a new subscription starts again at 1
        return results

    async def subscriptions(self) -> list[ess_pb2.SubscriptionInfo]:
        """This app's subscriptions as the middleware knows them (each with its
        ``filter``, if any: :meth:`Filter.of_pb` reads it)."""
        response = await retry_unary(
            lambda: self._events.GetSubscriptions(
                ess_pb2.GetSubscriptionsRequest(), metadata=self._md
            ),
            idempotent=True,
        )
        return list(response.subscriptions)

    async def list_keys(self, prefix: str = "") -> dict[str, int]:
        """Name -> id of every key under ``prefix`` this app may see (paged for it).

        ``prefix`` is a name prefix as given (``Vehicle.Cabin`` also matches
        ``Vehicle.CabinX``; end it with a dot for a whole branch).
        """
        keys: dict[str, int] = {}
        start = ""
        while True:
            request = vstore_pb2.ListKeysRequest(prefix=prefix, start_after=start)
            page = await retry_unary(
                functools.partial(self._vstore.ListKeys, request, metadata=self._md),
                idempotent=True,
            )
            keys.update({k.name: k.id for k in page.keys})
            start = page.next_start_after
            if not start:
                return keys

    async def actuate(self, name: str, data: bytes) -> None:
        """Ask the provider of actuator ``name`` to set it to ``data``; return when done.

        ``data`` is the value in the key's encoding (``values.encode(40,
        datatype="uint8")`` for a typed key). Checked first (an actuator, the
        ``actuate`` scope, the key's datatype and rule), then forwarded to the
        provider that claimed it (of this SDK or a KUKSA provider), whose answer
        this waits for, at most the middleware's ``actuation_timeout_s`` (5 s).
        The V-Store value changes when the provider publishes it.

        Raises:
            grpc.aio.AioRpcError: UNAVAILABLE (no provider claims it, or it did
                not answer in time), INVALID_ARGUMENT (not an actuator, a bad
                value, or the provider refused: its reason), NOT_FOUND,
                PERMISSION_DENIED.
        """
        await self.actuate_many({name: data})

    async def actuate_many(self, targets: Mapping[str, bytes]) -> None:
        """Set several actuators in one request (as :meth:`actuate`); every one is
        checked before any is sent, and each provider gets its targets together."""
        request = actuation_pb2.ActuateRequest(
            targets=[actuation_pb2.Target(name=n, data=d) for n, d in targets.items()]
        )
        # Not idempotent: retried only when refused before the middleware saw it.
        await retry_unary(
            lambda: self._actuation.Actuate(request, metadata=self._md), idempotent=False
        )

    async def events(self) -> AsyncIterator[ClientEvent]:
        """Yield events forever, reconnecting and re-registering as needed.

        Raises:
            grpc.aio.AioRpcError: a non-retryable failure, or any failure with
                ``reconnect=False``.
        """
        async for batch in self.batches():
            for event in batch:
                yield event

    async def batches(self) -> AsyncIterator[list[ClientEvent]]:
        """Like :meth:`events`, a batch at a time: the events of one message of
        the stream (never empty; a reconnection is a batch of its own).

        An app that takes one batch and then works on it reads at its own pace:
        while it does not read, the middleware's queues for it fill and drop.
        A batch counts as read (and is acknowledged, in groups of half the
        window) when the app asks for the next one.
        """
        if self._call is None:
            raise RuntimeError("connect() first")
        while True:
            call = self._call
            assert call is not None
            unacked = 0  # batches read by the app, not yet acknowledged
            ack_refused = False  # the call had ended when the app asked for more
            try:
                while True:
                    if self._closed:
                        return  # close() while the app held the last batch
                    try:
                        if unacked >= self._ack_every:
                            try:
                                await call.write(ess_pb2.EventsRequest(read=unacked))
                            except (asyncio.InvalidStateError, grpc.aio.AioRpcError):
                                ack_refused = True  # read() says how the call ended
                            unacked = 0
                        batch = await call.read()
                    except asyncio.CancelledError:
                        if self._closed:
                            return  # close() from another task ends the iteration
                        raise
                    if not isinstance(batch, ess_pb2.EventBatch):
                        break  # EOF: the middleware ended the stream
                    self._backoff.reset()  # the stream works again
                    unacked += 1  # read once the app asks for the next one
                    events = [
                        e for pb in batch.events if (e := await self._convert(pb)) is not None
                    ]
                    if events:
                        yield events
                code = grpc.StatusCode.UNAVAILABLE  # the middleware ended the stream
            except grpc.aio.AioRpcError as e:
                code = e.code()
                if self._closed:
                    return
                reason = dict(e.trailing_metadata() or ()).get(REASON_HEADER)
                if reason == REASON_REPLACED:
                    # Another instance of this app took over: fighting it back would
                    # make the two replace each other forever.
                    raise StreamReplacedError(self.app_id) from e
                if ack_refused and code == grpc.StatusCode.INTERNAL:
                    # The middleware ended the stream while the app held a batch:
                    # grpc then answers the acknowledgement with an INTERNAL of its
                    # own, which replaces the middleware's status (and its reason).
                    if not self._reconnect_enabled:
                        raise RuntimeError(
                            "the middleware ended the event stream while the app held a "
                            "batch (grpc keeps no status then)"
                        ) from e
                    code = grpc.StatusCode.UNAVAILABLE
                elif not self._reconnect_enabled or code not in RETRYABLE:
                    raise
            if self._closed:
                return
            if not self._reconnect_enabled:
                raise RuntimeError("the middleware ended the event stream")
            log.info("app %s: event stream ended (%s); reconnecting", self.app_id, code.name)
            back = await self._reconnect()
            if self._on_reconnect is not None:
                result = self._on_reconnect(back)
                if inspect.isawaitable(result):
                    await result
            yield [back]

    # -- internals ---------------------------------------------------------------

    async def _register(
        self, subs: Sequence[Sub], *, force_current: bool = False
    ) -> list[SubscriptionResult]:
        request = ess_pb2.RegisterRequest(
            subscriptions=[
                ess_pb2.Subscription(
                    key=s.key,
                    queue=s.queue,
                    trigger=ess_pb2.TRIGGER_ON_UPDATE if s.on_update else ess_pb2.TRIGGER_ON_CHANGE,
                    want_current=s.want_current or force_current,
                    filter=s.filter.to_pb() if s.filter is not None else None,
                )
                for s in subs
            ]
        )
        response = await retry_unary(
            lambda: self._events.Register(request, metadata=self._md), idempotent=True
        )
        results = [self._result(r) for r in response.results]
        for r, pb in zip(results, response.results, strict=True):
            if r.ok:
                self.names[r.key_id] = r.key
                self._last_seq[r.key_id] = pb.seq  # 0 if new; where it goes on if resumed
        return results

    @staticmethod
    def _result(r: ess_pb2.SubscriptionResult) -> SubscriptionResult:
        return SubscriptionResult(
            r.key,
            r.key_id,
            r.status == ess_pb2.STATUS_OK,
            _STATUS_NAMES.get(r.status, str(r.status)),
            r.current if r.HasField("current") else None,
            r.detail,
            r.no_provider,
        )

    async def _convert(self, pb: ess_pb2.Event) -> ClientEvent | None:
        kind = pb.WhichOneof("event")
        if kind == "data_updated":
            d = pb.data_updated
            last = self._last_seq.get(d.key, 0)
            ahead = (d.seq - last) % SEQ_CYCLE
            if 0 < ahead < SEQ_CYCLE // 2:
                missed = ahead - 1
                self._last_seq[d.key] = d.seq
            else:
                missed = 0  # an event queued before a re-registration: not a gap
            self.missed_total += missed
            return DataEvent(
                d.key,
                self.names.get(d.key),
                d.seq,
                d.time_ns,
                d.data if d.HasField("data") else None,
                d.queue,
                missed,
                d.writes or 1,
            )
        if kind == "key_added":
            self.names[pb.key_added.key] = pb.key_added.name
            if pb.key_added.name in self._waiting:
                self._waiting.discard(pb.key_added.name)
                await self._register([self._wanted[pb.key_added.name]])
            return KeyAddedEvent(pb.key_added.key, pb.key_added.name)
        if kind == "key_removed":
            key, name = pb.key_removed.key, pb.key_removed.name
            self.names.pop(key, None)
            self._last_seq.pop(key, None)
            if name in self._wanted:
                # The middleware ended the subscription; re-register if the key comes back.
                self._waiting.add(name)
            return KeyRemovedEvent(key, name)
        if kind == "resync":
            await self._refresh_after_resync()
            return ResyncEvent(pb.resync.lost)
        if kind == "key_stale":
            s = pb.key_stale
            return KeyStaleEvent(s.key, self.names.get(s.key), s.last_write_ns, s.period_ns)
        if kind == "key_fresh":
            f = pb.key_fresh
            return KeyFreshEvent(f.key, self.names.get(f.key), f.write_ns)
        if kind in ("provider_gone", "provider_back"):
            p = pb.provider_gone if kind == "provider_gone" else pb.provider_back
            keys = tuple(p.keys)
            names = tuple(self.names.get(k) for k in keys)
            event = ProviderGoneEvent if kind == "provider_gone" else ProviderBackEvent
            return event(p.provider, keys, names)
        return None  # `started` appears only first, handled by connect()

    async def _refresh_after_resync(self) -> None:
        self.names = {i: name for name, i in (await self.list_keys()).items()}
        active = {s.key for s in await self.subscriptions()}
        for name in self._wanted:
            if name not in active:
                self._waiting.add(name)
        missing_now = [self._wanted[n] for n in self._waiting if n in set(self.names.values())]
        if missing_now:
            for sub, r in zip(missing_now, await self._register(missing_now), strict=True):
                if r.ok:
                    self._waiting.discard(sub.key)

    async def _reconnect(self) -> ReconnectedEvent:
        backoff = self._backoff  # kept across reconnects; reset once events flow again
        previous_boot = self.boot_id
        while True:
            try:
                await asyncio.sleep(backoff.delay())
                await self.connect(timeout=None)
                self._last_seq.clear()  # _register sets where each subscription goes on
                subs = list(self._wanted.values())
                results = await self._register(subs, force_current=True) if subs else []
            except grpc.aio.AioRpcError as e:
                if e.code() not in RETRYABLE:
                    raise
                continue
            self._waiting = {s.key for s, r in zip(subs, results, strict=True) if not r.ok}
            restarted = self.boot_id != previous_boot
            if restarted:
                self.names = {r.key_id: r.key for r in results if r.ok}
            log.info(
                "app %s: reconnected (%s), %d subscriptions registered again",
                self.app_id,
                "middleware restarted" if restarted else "same middleware",
                len(subs),
            )
            return ReconnectedEvent(self.boot_id or "", restarted, tuple(results))
