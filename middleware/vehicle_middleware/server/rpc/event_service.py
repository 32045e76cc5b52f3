"""The EventService servicer: Events, GetEvents, Register, Deregister, GetSubscriptions.

Thin: identity, conversion, one call into the ESS or a stream session
(:mod:`vehicle_middleware.server.session`: its lifecycle, delivery loop and end reason are
the KUKSA subscriptions' too). ``Events`` also reads the app's
acknowledgements into its stream's window.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import grpc
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.ess import EventSubSystem, NotReadingEventsError
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.server import codecs
from vehicle_middleware.server.auth.authentication import Authenticator
from vehicle_middleware.server.auth.read_policy import StreamReadPolicy
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.errors import InvalidRequestError, LimitExceededError
from vehicle_middleware.server.journal.taps import filter_record
from vehicle_middleware.server.rpc import convert
from vehicle_middleware.server.rpc.batches import EventBytes
from vehicle_middleware.server.rpc.batches_reference import EventMessages
from vehicle_middleware.server.rpc.decoding import Malformed
from vehicle_middleware.server.rpc.identity import caller
from vehicle_middleware.server.rpc.status import check_decoded, maps_errors
from vehicle_middleware.server.session import AppStream, EndReason, Record, Session, Streams
from vehicle_middleware.server.write_path import WritePath
from vehicle_middleware.vstore import VStore

__all__ = ["PRE_ENCODED", "EventService"]

PRE_ENCODED: Final = frozenset({"Events", "GetEvents"})
"""The methods whose messages the servicer writes as bytes it encoded itself
(:class:`vehicle_middleware.server.codecs.BatchEncoder`): their handlers pass them on as they
are."""

_ENCODERS: Final[dict[codecs.Codecs, Callable[[], codecs.BatchEncoder]]] = {
    codecs.Codecs.FAST: EventBytes,
    codecs.Codecs.REFERENCE: EventMessages,
}
"""An app stream's encoder, by the implementation selected
(:func:`vehicle_middleware.server.codecs.select`)."""

log = logging.getLogger(__name__)


class EventService(ess_pb2_grpc.EventServiceServicer):
    def __init__(
        self,
        *,
        authenticator: Authenticator,
        read_policy: StreamReadPolicy,
        streams: Streams,
        ess: EventSubSystem,
        store: VStore,
        writes: WritePath,
        boot_id: str,
        limits: RequestLimits,
        record: Record,
    ) -> None:
        self._authenticator = authenticator
        self._read_policy = read_policy
        self._streams = streams
        self._ess = ess
        self._store = store
        self._writes = writes
        self._boot_id = boot_id
        self._limits = limits
        self._record = record

    @maps_errors()
    async def GetEvents(
        self, request: ess_pb2.GetEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who = caller(context, self._authenticator)
        queues = convert.queue_configs(request.queues)
        async with self._streams.session(who, queues) as session:
            await self._deliver(session, context)

    @maps_errors()
    async def Events(
        self,
        requests: AsyncIterator[ess_pb2.EventsRequest | Malformed],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        who = caller(context, self._authenticator)
        first = await anext(aiter(requests), None)
        if first is None:
            raise InvalidRequestError("open", "the stream ended before its first request")
        check_decoded(first)
        assert isinstance(first, ess_pb2.EventsRequest)
        if not first.HasField("open"):
            raise InvalidRequestError(
                "open", "the first EventsRequest must carry open (the queues and the window)"
            )
        limits = self._limits
        window = first.open.window or limits.stream_window
        if window > limits.max_stream_window:
            raise InvalidRequestError(
                "open.window",
                f"{window} exceeds the server's maximum window of {limits.max_stream_window}",
            )
        queues = convert.queue_configs(first.open.queues)
        async with self._streams.session(who, queues, window=window) as session:
            acks = asyncio.create_task(_read_acks(requests, session.stream))
            try:
                await self._deliver(session, context)
            finally:
                acks.cancel()

    async def _deliver(self, session: Session, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """The stream's first message (``started``), then every batch, each as one
        ``EventBatch`` (split where it would exceed the message limit)."""
        stream = session.stream
        assert stream.effective is not None
        window = stream.window
        started = convert.started_batch(
            self._boot_id, stream.effective, window=window.size or 0, head=self._writes.head()
        )
        await context.write(started.SerializeToString())
        max_bytes = self._limits.max_message_bytes - 1024
        encoder = _ENCODERS[codecs.selected()]()
        async for events in session.batches():
            messages = encoder.messages(events, max_bytes)
            window.sent(len(messages))
            for message in messages:
                await context.write(message)
                stream.bytes_sent += len(message)

    @maps_errors(field="subscriptions")
    async def Register(
        self, request: ess_pb2.RegisterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ess_pb2.RegisterResponse:
        who = caller(context, self._authenticator)
        app = who.app
        convert.check_count(
            "subscriptions", request.subscriptions, self._limits.max_keys_per_request
        )
        if app not in self._streams:
            raise NotReadingEventsError(app)
        requests = convert.subscription_requests(request.subscriptions)
        self._check_subscription_limit(app, [r.key for r in requests])
        store = self._store
        current = 0
        counted: set[str] = set()
        policy = self._read_policy
        for r in requests:
            # Only keys the app may read, each once: the check must not measure secrets.
            if not r.want_current or r.key in counted or not who.grants.allows("read", r.key):
                continue
            counted.add(r.key)
            key_id = store.id_of(r.key)
            if key_id is not None and policy.may_read(app, r.key):
                current += len(store.peek(key_id)[0] or b"")
        convert.check_fits(
            "the current values asked for",
            current,
            self._limits.max_message_bytes - 64 * 1024,
            "ask for them in smaller requests",
        )
        with policy.calling(who):
            results = self._ess.register(app, requests)
        for req, res in zip(requests, results, strict=True):
            self._record(
                Kind.REGISTER,
                app=app,
                key=res.key,
                key_id=res.key_id,
                queue=req.queue,
                trigger=req.trigger.name.lower(),
                status=res.status.name.lower(),
                filter=filter_record(req.filter),
            )
        return ess_pb2.RegisterResponse(results=convert.register_response(results))

    def _check_subscription_limit(self, app: str, keys: list[str]) -> None:
        held = {s.key for s in self._ess.subscriptions(app)}
        # Its KUKSA subscriptions' too: one app, one limit.
        after = len(held | set(keys)) + self._streams.subscriptions_held(app, besides=app)
        limit = self._limits.max_subscriptions_per_app
        if after > limit:
            raise LimitExceededError(
                "subscriptions", limit, f"app {app!r} would hold {after} subscriptions"
            )

    @maps_errors(field="keys")
    async def Deregister(
        self, request: ess_pb2.DeregisterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ess_pb2.DeregisterResponse:
        app = caller(context, self._authenticator).app
        convert.check_count("keys", request.keys, self._limits.max_keys_per_request)
        results = self._ess.deregister(app, list(request.keys))
        for r in results:
            self._record(
                Kind.DEREGISTER, app=app, key=r.key, key_id=r.key_id, status=r.status.name.lower()
            )
        return ess_pb2.DeregisterResponse(results=convert.register_response(results))

    @maps_errors()
    async def GetSubscriptions(
        self, request: ess_pb2.GetSubscriptionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ess_pb2.GetSubscriptionsResponse:
        app = caller(context, self._authenticator).app
        infos = self._ess.subscriptions(app)
        return ess_pb2.GetSubscriptionsResponse(subscriptions=convert.subscription_infos(infos))


async def _read_acks(
    requests: AsyncIterator[ess_pb2.EventsRequest | Malformed], stream: AppStream
) -> None:
    """Apply the app's acknowledgements to its window; a protocol error ends the stream."""
    try:
        async for request in requests:
            check_decoded(request)
            assert isinstance(request, ess_pb2.EventsRequest)
            if request.HasField("open"):
                raise InvalidRequestError("open", "only the first EventsRequest may carry open")
            stream.acknowledge(request.read)
    except InvalidRequestError as e:
        stream.finish(EndReason.FAILED, e)
    except grpc.aio.AioRpcError:
        pass  # the call ended: the delivery side sees it too
