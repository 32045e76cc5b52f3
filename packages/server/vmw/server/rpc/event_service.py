"""The EventService servicer: Events, GetEvents, Register, Deregister, GetSubscriptions.

Thin: identity, conversion, one call into the ESS or the delivery loop
(:mod:`vmw.server.delivery`). ``Events`` also reads the app's acknowledgements
into its stream's window.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from vmw.contract.wire import REASON_HEADER, REASON_REPLACED, REASON_SHUTDOWN
from vmw.ess import NotReadingEventsError
from vmw.proto.ess.v1 import ess_pb2, ess_pb2_grpc
from vmw.server.access import Caller
from vmw.server.delivery import AppStream, EndReason, deliver
from vmw.server.errors import InvalidRequestError, LimitExceededError
from vmw.server.rpc import convert
from vmw.server.rpc.decoding import Malformed
from vmw.server.rpc.identity import caller
from vmw.server.rpc.status import check_decoded, maps_errors
from vmw.server.runtime import Runtime

__all__ = ["EventService"]

log = logging.getLogger(__name__)


class EventService(ess_pb2_grpc.EventServiceServicer):
    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    @maps_errors()
    async def GetEvents(
        self, request: ess_pb2.GetEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who = caller(context, self._rt.access)
        stream = self._rt.open_stream(who.app, convert.queue_configs(request.queues), who.grants)
        await self._serve(stream, who, context)

    @maps_errors()
    async def Events(
        self,
        requests: AsyncIterator[ess_pb2.EventsRequest | Malformed],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        who = caller(context, self._rt.access)
        first = await anext(aiter(requests), None)
        if first is None:
            raise InvalidRequestError("open", "the stream ended before its first request")
        check_decoded(first)
        assert isinstance(first, ess_pb2.EventsRequest)
        if not first.HasField("open"):
            raise InvalidRequestError(
                "open", "the first EventsRequest must carry open (the queues and the window)"
            )
        settings = self._rt.settings
        window = first.open.window or settings.stream_window
        if window > settings.max_stream_window:
            raise InvalidRequestError(
                "open.window",
                f"{window} exceeds the server's maximum window of {settings.max_stream_window}",
            )
        queues = convert.queue_configs(first.open.queues)
        stream = self._rt.open_stream(who.app, queues, who.grants, window=window)
        acks = asyncio.create_task(_read_acks(requests, stream))
        try:
            await self._serve(stream, who, context)
        finally:
            acks.cancel()

    async def _serve(
        self, stream: AppStream, who: Caller, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        """Run an open stream until it ends; then say why, as its status."""
        app = who.app
        self._rt.access.stream_opened(app)
        expiry = None
        if who.expires_at is not None:
            loop = asyncio.get_running_loop()
            expiry = loop.call_later(max(0.0, who.expires_at - time.time()), stream.expire)
        try:
            assert stream.effective is not None
            window = stream.window.size or 0
            await context.write(
                convert.started_batch(
                    self._rt.boot_id, stream.effective, window=window, head=self._rt.head()
                )
            )
            await deliver(self._rt, stream, context.write)
        except asyncio.CancelledError:
            if stream.end_reason is None or context.cancelled():
                raise  # the peer went away (or the server is cancelling it): nothing to say
        finally:
            if expiry is not None:
                expiry.cancel()
            self._rt.access.stream_closed(app)
            self._rt.close_stream(stream)
        reason = stream.end_reason
        if reason is EndReason.FAILED:
            assert stream.error is not None
            raise stream.error
        if reason is EndReason.SHUTDOWN:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "the middleware is shutting down; reconnect and register again",
                trailing_metadata=((REASON_HEADER, REASON_SHUTDOWN),),
            )
        if reason is EndReason.EXPIRED:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"the token of app {app!r} expired: its stream and subscriptions are gone; "
                "reconnect with a fresh token",
            )
        await context.abort(
            grpc.StatusCode.ABORTED,
            f"a newer event stream of app {app!r} replaced this one",
            trailing_metadata=((REASON_HEADER, REASON_REPLACED),),
        )

    @maps_errors(field="subscriptions")
    async def Register(
        self, request: ess_pb2.RegisterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ess_pb2.RegisterResponse:
        who = caller(context, self._rt.access)
        app = who.app
        convert.check_count(
            "subscriptions", request.subscriptions, self._rt.settings.max_keys_per_request
        )
        if not self._rt.has_stream(app):
            raise NotReadingEventsError(app)
        requests = convert.subscription_requests(request.subscriptions)
        self._check_subscription_limit(app, [r.key for r in requests])
        store = self._rt.store
        current = 0
        counted: set[str] = set()
        access = self._rt.access
        for r in requests:
            # Only keys the app may read, each once: the check must not measure secrets.
            if not r.want_current or r.key in counted or not who.grants.allows("read", r.key):
                continue
            counted.add(r.key)
            key_id = store.id_of(r.key)
            if key_id is not None and access.may_read(app, r.key):
                current += len(store.peek(key_id)[0] or b"")
        convert.check_fits(
            "the current values asked for",
            current,
            self._rt.settings.max_message_bytes - 64 * 1024,
            "ask for them in smaller requests",
        )
        with self._rt.access.calling(who):
            results = self._rt.ess.register(app, requests)
        for req, res in zip(requests, results, strict=True):
            self._rt.record(
                "register",
                app=app,
                key=res.key,
                key_id=res.key_id,
                queue=req.queue,
                trigger=req.trigger.name.lower(),
                status=res.status.name.lower(),
            )
        return ess_pb2.RegisterResponse(results=convert.register_response(results))

    def _check_subscription_limit(self, app: str, keys: list[str]) -> None:
        held = {s.key for s in self._rt.ess.subscriptions(app)}
        after = len(held | set(keys))
        limit = self._rt.settings.max_subscriptions_per_app
        if after > limit:
            raise LimitExceededError(
                "subscriptions", limit, f"app {app!r} would hold {after} subscriptions"
            )

    @maps_errors(field="keys")
    async def Deregister(
        self, request: ess_pb2.DeregisterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ess_pb2.DeregisterResponse:
        app = caller(context, self._rt.access).app
        convert.check_count("keys", request.keys, self._rt.settings.max_keys_per_request)
        results = self._rt.ess.deregister(app, list(request.keys))
        for r in results:
            self._rt.record(
                "deregister", app=app, key=r.key, key_id=r.key_id, status=r.status.name.lower()
            )
        return ess_pb2.DeregisterResponse(results=convert.register_response(results))

    @maps_errors()
    async def GetSubscriptions(
        self, request: ess_pb2.GetSubscriptionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ess_pb2.GetSubscriptionsResponse:
        app = caller(context, self._rt.access).app
        infos = self._rt.ess.subscriptions(app)
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
