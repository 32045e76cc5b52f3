"""The VStore servicer: AddKeys, RemoveKeys, Set, Publish, Get, ListKeys. Thin."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from middleware.rpc import convert
from middleware.rpc.identity import app_id
from middleware.rpc.status import maps_errors, status_for
from middleware.runtime import Runtime
from vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vstore import Entry, Update, VStoreError

__all__ = ["VStoreService"]

log = logging.getLogger(__name__)


class VStoreService(vstore_pb2_grpc.VStoreServicer):
    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self._limit = runtime.settings.max_keys_per_request

    @maps_errors(field="names")
    async def AddKeys(
        self, request: vstore_pb2.AddKeysRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.AddKeysResponse:
        app = app_id(context)
        convert.check_count("names", request.names, self._limit)
        before = len(self._rt.store)
        ids = self._rt.store.add_keys(request.names)
        if len(self._rt.store) != before:
            log.info("app %s added %d keys", app, len(self._rt.store) - before)
        return vstore_pb2.AddKeysResponse(
            keys=[vstore_pb2.KeyId(name=n, id=i) for n, i in zip(request.names, ids, strict=True)]
        )

    @maps_errors(field="names")
    async def RemoveKeys(
        self, request: vstore_pb2.RemoveKeysRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.RemoveKeysResponse:
        app = app_id(context)
        convert.check_count("names", request.names, self._limit)
        store = self._rt.store
        removed, not_found = [], []
        for name in request.names:
            if name in store:
                removed.append(vstore_pb2.KeyId(name=name, id=store.remove_key(name)))
            else:
                not_found.append(name)
        if removed:
            log.info("app %s removed %d keys", app, len(removed))
        return vstore_pb2.RemoveKeysResponse(removed=removed, not_found=not_found)

    @maps_errors(field="updates")
    async def Set(
        self, request: vstore_pb2.SetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.SetResponse:
        app_id(context)
        convert.check_count("updates", request.updates, self._limit)
        return convert.set_response(self._rt.store.set_many(convert.updates(request.updates)))

    @maps_errors()
    async def Publish(
        self,
        request_iterator: AsyncIterator[vstore_pb2.PublishRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> vstore_pb2.PublishSummary:
        app_id(context)
        store = self._rt.store
        batches = updates = 0
        async for request in request_iterator:
            convert.check_count(f"batch {batches}: updates", request.updates, self._limit)
            batch = [
                Update(u.id, u.data, None, u.time_ns if u.HasField("time_ns") else None)
                for u in request.updates
            ]
            try:
                store.set_many(batch)
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
        return vstore_pb2.PublishSummary(batches=batches, updates=updates)

    @maps_errors(field="names")
    async def Get(
        self, request: vstore_pb2.GetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.GetResponse:
        app_id(context)
        convert.check_count("names", request.names, self._limit)
        store = self._rt.store
        entries: list[Entry] = []
        not_found: list[str] = []
        for name in request.names:
            if name in store:
                entries.append(store.get(name))
            else:
                not_found.append(name)
        return convert.get_response(entries, not_found)

    @maps_errors()
    async def ListKeys(
        self, request: vstore_pb2.ListKeysRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> vstore_pb2.ListKeysResponse:
        app_id(context)
        keys = self._rt.store.list_keys(request.prefix)
        return vstore_pb2.ListKeysResponse(keys=[vstore_pb2.KeyId(name=n, id=i) for n, i in keys])
