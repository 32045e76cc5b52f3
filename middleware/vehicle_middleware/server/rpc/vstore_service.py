"""The VStore servicer: AddKeys, RemoveKeys, Set, Publish, Get, ListKeys, WatchDemand. Thin."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.contract.wire import KEYS_VERSION_HEADER
from vehicle_middleware.ess import EventSubSystem
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.permissions import require
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.auth.stream_counts import StreamCounts
from vehicle_middleware.server.cluster.node import ClusterNode
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.demand import DemandPublisher
from vehicle_middleware.server.errors import (
    InvalidRequestError,
    PermissionDeniedError,
    StreamConflictError,
    UnauthenticatedError,
)
from vehicle_middleware.server.rpc import convert
from vehicle_middleware.server.rpc.identity import caller
from vehicle_middleware.server.rpc.long_calls import scan_keys
from vehicle_middleware.server.rpc.ordered_writes import guarded_set
from vehicle_middleware.server.rpc.status import check_decoded, maps_errors, status_for
from vehicle_middleware.server.session import Record
from vehicle_middleware.server.write_path import WritePath
from vehicle_middleware.vstore import (
    Entry,
    InvalidKeyNameError,
    UnknownKeyError,
    VStore,
    VStoreError,
    check_key_name,
)

__all__ = ["VStoreService"]

log = logging.getLogger(__name__)


class VStoreService(vstore_pb2_grpc.VStoreServicer):
    def __init__(
        self,
        *,
        authenticator: Authenticator,
        claims: WriteClaims,
        rate_limits: RateLimits,
        stream_counts: StreamCounts,
        store: VStore,
        ess: EventSubSystem,
        writes: WritePath,
        cluster: ClusterNode | None,
        limits: RequestLimits,
        record: Record,
        demand: DemandPublisher,
    ) -> None:
        """``cluster``: the replication with peers (``Set`` with ``if_head`` waits
        for it; None without peers); ``demand``: tells WatchDemand streams their
        keys' demand."""
        self._authenticator = authenticator
        self._claims = claims
        self._rate_limits = rate_limits
        self._stream_counts = stream_counts
        self._store = store
        self._ess = ess
        self._writes = writes
        self._cluster = cluster
        self._limits = limits
        self._record = record
        self._demand = demand
        self._limit = limits.max_keys_per_request
        # A key name is at most 255 bytes: a page always fits in one message.
        self._page_size = max(1, min(10_000, limits.max_message_bytes // 300))

    @maps_errors(field="names")
    async def AddKeys(
        self, request: vstore_pb2.AddKeysRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.AddKeysResponse:
        who, names = self._names_request(request.names, context)
        claims = self._claims
        store = self._store
        for i, name in enumerate(names):
            # A new key needs create; an existing one (nothing changes, but its id
            # is returned) needs create or read, judged by name so that the answer
            # tells nothing about keys the caller may not see.
            if name not in store or not who.grants.allows("read", name):
                require(who, "create", name, field=f"names[{i}]")
        if request.claim:
            for i, name in enumerate(names):
                claims.check_write(who, name, field=f"names[{i}]")
            claims.check_claimable(who, names)  # before adding: a refusal changes nothing
        new = {n for n in names if n not in store}
        if new:
            with self._writes.writing(who.app):  # one request: one replicated event
                ids = store.add_keys(names)
        else:
            ids = store.add_keys(names)
        if request.claim:
            claims.claim(who, names)
        if new:
            log.info("app %s added %d keys", who.app, len(new))
            for name, key_id in zip(names, ids, strict=True):
                if name in new:
                    new.discard(name)
                    self._record(Kind.KEY_ADDED, app=who.app, key=name, key_id=key_id)
        return vstore_pb2.AddKeysResponse(
            keys=[vstore_pb2.KeyId(name=n, id=i) for n, i in zip(names, ids, strict=True)],
            keys_version=self._writes.keys_version,
            head=self._writes.head(),
        )

    @maps_errors(field="names")
    async def RemoveKeys(
        self, request: vstore_pb2.RemoveKeysRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.RemoveKeysResponse:
        who, names = self._names_request(request.names, context)
        for i, name in enumerate(names):
            require(who, "create", name, field=f"names[{i}]")
            owner = self._claims.claimed_by(name)
            if owner is not None and owner != who.app:
                raise PermissionDeniedError(
                    who.app, "remove", name, f"claimed by {owner!r}", field=f"names[{i}]"
                )
        removed, not_found = self._writes.remove_keys(names)
        if removed:
            log.info("app %s removed %d keys", who.app, len(removed))
            for name, key_id in removed:
                self._record(Kind.KEY_REMOVED, app=who.app, key=name, key_id=key_id)
        return vstore_pb2.RemoveKeysResponse(
            removed=[vstore_pb2.KeyId(name=n, id=i) for n, i in removed],
            not_found=not_found,
            head=self._writes.head(),
        )

    @maps_errors(field="updates")
    async def Set(
        self, request: vstore_pb2.SetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.SetResponse:
        who = caller(context, self._authenticator)
        convert.check_count("updates", request.updates, self._limit)
        updates = convert.updates(request.updates)
        store = self._store
        claims = self._claims
        for i, u in enumerate(updates):
            # Existence is not told: by name, refused whether or not the key exists; by
            # id, an unreadable key's id answers as an unused id.
            if isinstance(u.key, str):
                claims.check_write(who, u.key, field=f"updates[{i}]")
            elif (name := store.name_of(u.key)) is not None:
                claims.check_write_by_id(who, name, u.key, i, field=f"updates[{i}]")
        if request.HasField("if_head"):
            return await guarded_set(
                self._store, self._writes, self._cluster, who.app, updates, request.if_head
            )
        with self._writes.writing(who.app):
            results = store.set_many(updates)
        return convert.set_response(results, head=self._writes.head())

    @maps_errors()
    async def Publish(
        self,
        request_iterator: AsyncIterator[vstore_pb2.PublishRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> vstore_pb2.PublishSummary:
        who = caller(context, self._authenticator)
        counts = self._stream_counts
        counts.opened(who.app, publish=True)
        self._record(Kind.CONNECT, app=who.app, stream="publish", details={})
        flushed = False
        try:
            # The token's expiry ends the stream (and the claims it holds) through the
            # identity interceptor, as every stream (vehicle_middleware.server.expiry).
            summary, flushed = await self._publish(who, request_iterator, context)
            return summary
        finally:
            counts.closed(who.app, publish=True, clean=flushed)
            self._record(Kind.DISCONNECT, app=who.app, stream="publish", details={})

    async def _publish(
        self,
        who: Caller,
        request_iterator: AsyncIterator[vstore_pb2.PublishRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> tuple[vstore_pb2.PublishSummary, bool]:
        """The stream's summary, and whether its last message said ``flushing`` (the
        provider ends the stream itself: a dead one's stream also ends, silently)."""
        store = self._store
        claims = self._claims
        pace = self._rate_limits.publish_pace(who.app)
        writes = self._writes
        md = dict(context.invocation_metadata() or ())
        version = md.get(KEYS_VERSION_HEADER)
        batches = updates = 0
        flushing = False
        async for request in request_iterator:
            check_decoded(request)
            flushing = request.flushing
            if flushing and not request.updates:
                continue  # only says the stream ends
            if version is not None and version != writes.keys_version:
                raise StreamConflictError(
                    f"key ids changed since this provider added its keys (keys-version "
                    f"{version!r}, now {writes.keys_version!r}: the middleware restarted or keys "
                    f"were removed); add the keys again and publish with the new ids "
                    f"({batches} batches of this stream were written)"
                )
            if who.expires_at is not None and time.time() >= who.expires_at:
                raise UnauthenticatedError(
                    f"the token of app {who.app!r} expired during the Publish stream "
                    f"({batches} batches were written)"
                )
            pace.take(batches)
            convert.check_count(f"batch {batches}: updates", request.updates, self._limit)
            batch = convert.publish_rows(request.updates)
            try:
                if claims.checks_writes(who):
                    for i, u in enumerate(request.updates):
                        key_id: int = u.id
                        name = store.name_of(key_id)
                        if name is not None:
                            where = f"updates[{i}] (batch {batches})"
                            claims.check_write_by_id(who, name, key_id, i, field=where)
                with writes.writing(who.app):
                    store.write_many(batch)
            except VStoreError as e:
                code, message = status_for(e, field="updates")
                await context.abort(
                    code,
                    f"{message} (batch {batches}; the {batches} batches before it were written)",
                )
            batches += 1
            updates += len(batch)
            # Yield to the delivery tasks: a provider whose next message is
            # already buffered would otherwise never let the loop run them.
            await asyncio.sleep(0)
        summary = vstore_pb2.PublishSummary(batches=batches, updates=updates, head=writes.head())
        return summary, flushing

    @maps_errors(field="names")
    async def Get(
        self, request: vstore_pb2.GetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.GetResponse:
        who, names = self._names_request(request.names, context)
        store = self._store
        entries: list[Entry] = []
        not_found: list[str] = []
        for name in names:
            # A key the caller may not read is as good as absent: its existence leaks nothing.
            if name in store and who.grants.allows("read", name):
                entries.append(store.get(name))
            else:
                not_found.append(name)
        response = convert.get_response(entries, not_found, self._ess.no_provider)
        response.head = self._writes.head()
        convert.check_fits(
            "the response",
            response.ByteSize(),
            self._limits.max_message_bytes - 1024,
            "get fewer keys per request",
        )
        return response

    @maps_errors()
    async def ListKeys(
        self, request: vstore_pb2.ListKeysRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.ListKeysResponse:
        who = caller(context, self._authenticator)
        page = min(self._page_size, request.limit or self._page_size)
        keys: list[tuple[str, int]] = []
        # The page is full or the branch is done: the scan goes on past the keys the
        # caller may not read (a cursor left among them would name one, and tell that
        # the branch holds keys), serving other callers every PAUSE_EVERY keys.
        scan = scan_keys(self._store, request.prefix, start_after=request.start_after)
        async with contextlib.aclosing(scan):
            async for name, key_id in scan:
                if len(keys) == page:
                    return _key_page(keys, keys[-1][0])
                if who.grants.allows("read", name):
                    keys.append((name, key_id))
        return _key_page(keys, "")  # the store has nothing more in this branch

    @maps_errors(field="names")
    async def WatchDemand(
        self, request: vstore_pb2.WatchDemandRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who, names = self._names_request(request.names, context)
        keys: dict[int, str] = {}
        for i, name in enumerate(names):
            require(who, "provide", name, field=f"names[{i}]")
            key_id = self._store.id_of(name)
            if key_id is None:
                error = UnknownKeyError(name)
                error.index = i
                raise error
            if key_id in keys:
                raise InvalidRequestError(f"names[{i}]", f"{name!r} is named twice")
            keys[key_id] = name
        counts = self._stream_counts
        counts.opened(who.app, publish=True)
        watch = self._demand.watch(keys)
        log.debug("app %s follows the demand of %d keys", who.app, len(keys))
        told: dict[int, tuple[bool, int]] = {}
        try:
            while True:
                # What a WatchDemand stream says of a key: watched, and its interval.
                # A change of what only KUKSA providers are told is no news here.
                changes = {
                    key: d
                    for key, d in (await watch.next()).items()
                    if told.get(key) != (d.watched, d.min_interval_ns)
                }
                if not changes:
                    continue
                told.update((key, (d.watched, d.min_interval_ns)) for key, d in changes.items())
                await context.write(convert.demand_update(changes, watch.keys))
        finally:
            self._demand.unwatch(watch)
            counts.closed(who.app, publish=True)

    def _names_request(
        self, field_value: Sequence[str], context: grpc.aio.ServicerContext[Any, Any]
    ) -> tuple[Caller, list[str]]:
        """The caller, and the ``names`` of a request: counted and syntax-checked."""
        who = caller(context, self._authenticator)
        convert.check_count("names", field_value, self._limit)
        names = list(field_value)
        self._check_names(names)
        return who, names

    @staticmethod
    def _check_names(names: list[str]) -> None:
        for i, name in enumerate(names):
            try:
                check_key_name(name)
            except InvalidKeyNameError as e:
                e.index = i
                raise


def _key_page(keys: list[tuple[str, int]], cursor: str) -> vstore_pb2.ListKeysResponse:
    return vstore_pb2.ListKeysResponse(
        keys=[vstore_pb2.KeyId(name=n, id=i) for n, i in keys], next_start_after=cursor
    )
