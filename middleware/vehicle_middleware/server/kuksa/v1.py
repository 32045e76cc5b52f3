"""The ``kuksa.val.v1.VAL`` servicer. Thin: identity, conversion, the V-Store and the ESS.

v1 reports per-entry failures in the response (``errors``, HTTP-style codes
from the project's one error table, the first one also as ``error``); a
failure of the call as a whole is a gRPC status. Calls not served answer
UNIMPLEMENTED (the generated base class does).
"""

from __future__ import annotations

import contextlib
from typing import Any

import grpc
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2, val_pb2, val_pb2_grpc
from vehicle_middleware.server.actuation import Actuation, Target
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.permissions import require
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.errors import InvalidRequestError, NotServedError, UnavailableError
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.kuksa.common import (
    actuation_target,
    kuksa_caller,
    readable_keys,
)
from vehicle_middleware.server.kuksa.info import SERVER_NAME, SERVER_VERSION
from vehicle_middleware.server.kuksa.subscriptions import KuksaSubscriptions
from vehicle_middleware.server.rpc.convert import check_count
from vehicle_middleware.server.rpc.long_calls import PAUSE_EVERY, breathe
from vehicle_middleware.server.rpc.status import maps_errors
from vehicle_middleware.server.signals import Signals
from vehicle_middleware.server.write_path import WritePath
from vehicle_middleware.vstore import UnknownKeyError, Update, VStore, VStoreError

__all__ = ["KuksaV1"]

_VALUE_VIEWS = (types_pb2.VIEW_UNSPECIFIED, types_pb2.VIEW_CURRENT_VALUE)
_METADATA_FIELDS = frozenset(f for f in types_pb2.Field.values() if f >= types_pb2.FIELD_METADATA)
_KNOWN_FIELDS = frozenset(types_pb2.Field.values())
_WRITTEN_FIELDS = frozenset({types_pb2.FIELD_VALUE, types_pb2.FIELD_ACTUATOR_TARGET})
_WRITABLE = "a Set writes FIELD_VALUE (2) or FIELD_ACTUATOR_TARGET (3)"


class KuksaV1(val_pb2_grpc.VALServicer):
    def __init__(
        self,
        *,
        authenticator: Authenticator,
        store: VStore,
        writes: WritePath,
        claims: WriteClaims,
        subscriptions: KuksaSubscriptions,
        limits: RequestLimits,
        signals: Signals,
        actuation: Actuation,
    ) -> None:
        self._authenticator = authenticator
        self._store = store
        self._writes = writes
        self._claims = claims
        self._subscriptions = subscriptions
        self._limits = limits
        self._signals = signals
        self._actuation = actuation

    @maps_errors()
    async def GetServerInfo(
        self, request: val_pb2.GetServerInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.GetServerInfoResponse:
        kuksa_caller(context, self._authenticator)
        return val_pb2.GetServerInfoResponse(name=SERVER_NAME, version=SERVER_VERSION)

    @maps_errors()
    async def StreamedUpdate(
        self,
        requests: Any,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        kuksa_caller(context, self._authenticator)
        raise NotServedError("kuksa.val.v1.VAL/StreamedUpdate", "write with Set")

    @maps_errors(field="entries")
    async def Get(
        self, request: val_pb2.GetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.GetResponse:
        who = kuksa_caller(context, self._authenticator)
        check_count("entries", request.entries, self._limits.max_keys_per_request)
        response = val_pb2.GetResponse()
        # The work is bounded as it goes: the response's size is counted entry by
        # entry and the call refused as soon as it cannot fit, before it is built; and
        # the loop serves other callers between two of its paths.
        size, limit = 0, self._limits.max_message_bytes
        store = self._store
        built, paused = 0, False
        for i, req in enumerate(request.entries):
            if i:
                await breathe()
                paused = True
            try:
                self._check_read(who, req.path, i)
                found = await readable_keys(self._store, req.path, who)
            except (VStoreError, InvalidRequestError, PermissionError) as e:
                response.errors.append(
                    types_pb2.DataEntryError(path=req.path, error=convert.v1_error(e))
                )
                continue
            value, target, metadata = _wanted(req.view, req.fields)
            for name, key_id in found:
                built += 1
                if built % PAUSE_EVERY == 0:
                    await breathe()
                    paused = True
                if paused and store.name_of(key_id) != name:
                    continue  # removed (its id maybe reused) while others were served
                entry = self._entry(name, key_id, value, target, metadata)
                size += entry.ByteSize() + _ENTRY_OVERHEAD
                if size > limit - 1024:
                    convert_fits(size, limit, f"entries[{i}] of {len(request.entries)}")
                response.entries.append(entry)
        if response.errors:
            response.error.CopyFrom(response.errors[0].error)
        convert_fits(response.ByteSize(), limit)
        return response

    def _check_read(self, who: Caller, path: str, i: int) -> None:
        # A pattern is checked per key below it; a key name (or branch) by name.
        if (
            "*" not in path
            and not who.grants.allows("read", path)
            and not any(who.grants.allows("read", n) for n, _ in self._store.iter_keys(path))
        ):
            require(who, "read", path, field=f"entries[{i}]")

    def _entry(
        self, name: str, key_id: int, value: bool, target: bool, metadata: bool
    ) -> types_pb2.DataEntry:
        entry = types_pb2.DataEntry(path=name)
        data, time_ns = self._store.peek(key_id)
        signal = self._signals.get(name)
        if value and convert.set_wire(entry.value, data, signal):
            convert.set_timestamp(entry.value.timestamp, time_ns)
        if metadata:
            entry.metadata.CopyFrom(convert.metadata_v1(signal, data))
        asked = self._actuation.targets.get(name) if target else None
        if asked is not None and convert.set_wire(entry.actuator_target, asked[0], signal):
            convert.set_timestamp(entry.actuator_target.timestamp, asked[1])
        return entry

    @maps_errors(field="updates")
    async def Set(
        self, request: val_pb2.SetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.SetResponse:
        who = kuksa_caller(context, self._authenticator)
        check_count("updates", request.updates, self._limits.max_keys_per_request)
        for i, update in enumerate(request.updates):
            _check_set_fields(update.fields, f"updates[{i}].fields")
        store = self._store
        writes: list[Update] = []
        targets: list[Target] = []
        response = val_pb2.SetResponse()
        for i, update in enumerate(request.updates):
            path = update.entry.path
            try:
                fields = set(update.fields) or {types_pb2.FIELD_VALUE}
                if fields & _METADATA_FIELDS:
                    raise InvalidRequestError(
                        f"updates[{i}].fields", "metadata is read-only (it comes from --vss)"
                    )
                if types_pb2.FIELD_ACTUATOR_TARGET in fields:
                    value = convert.v2_value_of_v1(update.entry.actuator_target)
                    targets.append(
                        actuation_target(
                            self._actuation, self._signals, who, path, value, f"updates[{i}]"
                        )
                    )
                if types_pb2.FIELD_VALUE not in fields:
                    continue
                self._claims.check_write(who, path, field=f"updates[{i}]")
                if path not in store:
                    raise UnknownKeyError(path)
                data = convert.to_store(path, self._signals.get(path), update.entry.value, "value")
                point = update.entry.value
                time_ns = convert.source_time(point, f"updates[{i}].entry.value")
                writes.append(Update(path, data, time_ns=time_ns))
            except (VStoreError, InvalidRequestError, PermissionError) as e:
                response.errors.append(
                    types_pb2.DataEntryError(path=path, error=convert.v1_error(e))
                )
        if response.errors:  # one bad update writes nothing
            response.error.CopyFrom(response.errors[0].error)
            return response
        if writes:
            with self._writes.writing(who.app):
                store.write_many(writes)
        if targets:
            try:
                await self._actuation.actuate(targets)
            except (VStoreError, InvalidRequestError, UnavailableError) as e:
                error = convert.v1_error(e)
                response.errors.extend(
                    types_pb2.DataEntryError(path=t.name, error=error) for t in targets
                )
                response.error.CopyFrom(error)
        return response

    @maps_errors(field="entries")
    async def Subscribe(
        self, request: val_pb2.SubscribeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who = kuksa_caller(context, self._authenticator)
        check_count("entries", request.entries, self._limits.max_keys_per_request)
        names: list[str] = []
        limits = self._limits
        most = min(limits.max_keys_per_request, limits.max_subscriptions_per_app)
        for i, entry in enumerate(request.entries):
            if i:
                await breathe()
            if entry.view not in _VALUE_VIEWS and not (
                entry.view == types_pb2.VIEW_FIELDS
                and set(entry.fields) <= {types_pb2.FIELD_VALUE, types_pb2.FIELD_PATH}
            ):
                raise InvalidRequestError(
                    f"entries[{i}].view", "only current values can be subscribed to here"
                )
            self._check_read(who, entry.path, i)
            names.extend(n for n, _ in await readable_keys(self._store, entry.path, who))
            if len(names) > most:  # refused as soon as it is too many, not once all resolved
                raise InvalidRequestError(
                    "entries",
                    f"at most {most} signals per subscription; entries[0..{i}] of "
                    f"{len(request.entries)} already name {len(names)}",
                )
        store = self._store
        async with contextlib.aclosing(self._subscriptions.updates(who, names, 0)) as stream:
            async for batch in stream:
                response = val_pb2.SubscribeResponse()
                for key_id, _, time_ns, data, _ in batch:
                    name = store.name_of(key_id)
                    if name is None:
                        continue
                    update = response.updates.add(fields=[types_pb2.FIELD_VALUE])
                    update.entry.path = name
                    if convert.set_wire(update.entry.value, data, self._signals.get(name)):
                        convert.set_timestamp(update.entry.value.timestamp, time_ns)
                await context.write(response)


def _check_set_fields(fields: Any, where: str) -> None:
    """Refuse a Set update whose ``fields`` hold a value the enum does not know, or name
    nothing a Set writes (none given means FIELD_VALUE); metadata is refused per entry.

    Raises:
        InvalidRequestError: naming ``where`` and the value.
    """
    for value in fields:
        if value not in _KNOWN_FIELDS:
            raise InvalidRequestError(where, f"unknown field {value}; {_WRITABLE}")
    if fields and not set(fields) & (_WRITTEN_FIELDS | _METADATA_FIELDS):
        named = ", ".join(types_pb2.Field.Name(v) for v in fields)
        raise InvalidRequestError(where, f"{named} names nothing to write; {_WRITABLE}")


def _wanted(view: int, fields: Any) -> tuple[bool, bool, bool]:
    """(value, actuator target, metadata) a v1 view and its fields ask for."""
    if view in _VALUE_VIEWS:
        return True, False, False
    if view == types_pb2.VIEW_TARGET_VALUE:
        return False, True, False
    if view == types_pb2.VIEW_METADATA:
        return False, False, True
    if view == types_pb2.VIEW_ALL:
        return True, True, True
    wanted = set(fields)
    return (
        types_pb2.FIELD_VALUE in wanted,
        types_pb2.FIELD_ACTUATOR_TARGET in wanted,
        bool(wanted & _METADATA_FIELDS),
    )


_ENTRY_OVERHEAD = 8
"""Bytes a repeated entry adds beyond its own (its tag and length), at most."""


def convert_fits(size: int, max_bytes: int, where: str = "") -> None:
    """Refuse a response over the message limit; ``where``: how far it was counted
    (refused as it was built, before it was done: it would be larger still)."""
    from vehicle_middleware.server.rpc.convert import check_fits

    advice = "get fewer or narrower paths per request"
    if where:
        advice = f"counted as far as {where} and refused there; {advice}"
    check_fits("the response", size, max_bytes - 1024, advice)
