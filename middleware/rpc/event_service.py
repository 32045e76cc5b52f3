"""The EventService servicer: GetEvents, Register, Deregister, GetSubscriptions.

Thin: identity, conversion, one call into the ESS. The delivery loop of
GetEvents is the one piece of logic here: wait for the doorbell, drain one
batch, write it; gRPC flow control makes ``write`` wait for a slow reader,
while the ESS queues and the drop rule absorb the back-pressure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import grpc

from ess import NotReadingEventsError
from middleware.errors import LimitExceededError
from middleware.journal.taps import record_delivered
from middleware.rpc import convert
from middleware.rpc.identity import caller
from middleware.rpc.status import maps_errors
from middleware.runtime import Runtime
from vehicle.ess.v1 import ess_pb2, ess_pb2_grpc

__all__ = ["EventService"]

log = logging.getLogger(__name__)

REASON_HEADER = "vmw-reason"
"""Trailing metadata saying why the middleware ended a stream (``replaced``, ``shutdown``)."""


class EventService(ess_pb2_grpc.EventServiceServicer):
    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    @maps_errors()
    async def GetEvents(
        self, request: ess_pb2.GetEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who = caller(context, self._rt.access)
        app = who.app
        stream = self._rt.open_stream(app, convert.queue_configs(request.queues), who.grants)
        self._rt.access.stream_opened(app)
        expiry = None
        if who.expires_at is not None:
            loop = asyncio.get_running_loop()
            expiry = loop.call_later(max(0.0, who.expires_at - time.time()), stream.expire)
        ess = self._rt.ess
        batch_max = self._rt.settings.batch_max
        journal = self._rt.journal
        max_bytes = self._rt.settings.max_message_bytes - 1024
        slow_apps = self._rt.slow_apps
        try:
            assert stream.effective is not None
            await context.write(convert.started_batch(self._rt.boot_id, stream.effective))
            doorbell = stream.doorbell
            while not (stream.replaced or stream.expired or stream.ended):
                doorbell.clear()
                if not ess.pending(app):
                    await doorbell.wait()
                    if stream.replaced or stream.expired or stream.ended:
                        break
                events = ess.drain(app, batch_max)
                batch = convert.event_batch(events)
                for part in convert.split_to_fit(batch, max_bytes):
                    await context.write(part)
                if journal is not None and journal.full:
                    record_delivered(journal, app, events)
                # Drops are reported per episode by the runtime's SlowAppWatch (also
                # while this loop is blocked on a reader that stopped); during one it
                # needs to know when the app has read everything queued.
                if slow_apps.in_episode(app) and not ess.pending(app):
                    slow_apps.drained(app)
        except asyncio.CancelledError:
            if not (stream.replaced or stream.expired or stream.ended) or context.cancelled():
                raise  # the peer went away (or the server is cancelling it): nothing to say
        finally:
            if expiry is not None:
                expiry.cancel()
            self._rt.access.stream_closed(app)
            self._rt.close_stream(stream)
        if stream.ended and not stream.replaced:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "the middleware is shutting down; reconnect and register again",
                trailing_metadata=((REASON_HEADER, "shutdown"),),
            )
        if stream.expired and not stream.replaced:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"the token of app {app!r} expired: its stream and subscriptions are gone; "
                "reconnect with a fresh token",
            )
        await context.abort(
            grpc.StatusCode.ABORTED,
            f"a newer GetEvents stream of app {app!r} replaced this one",
            trailing_metadata=((REASON_HEADER, "replaced"),),
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
