"""The ``kuksa.val.v2.VAL`` servicer. Thin: identity, conversion, the V-Store and the ESS.

Errors are domain errors mapped by the project's one table
(:mod:`vehicle_middleware.server.rpc.status`); calls not served answer UNIMPLEMENTED (the
generated base class does).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError, Message
from vehicle_middleware.ess import Filter
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2, val_pb2, val_pb2_grpc
from vehicle_middleware.server import codecs
from vehicle_middleware.server.actuation import Actuation, ActuatorProvider
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.permissions import require
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.demand import DemandPublisher
from vehicle_middleware.server.errors import (
    InvalidRequestError,
    LimitExceededError,
    NothingProvidedError,
    NotServedError,
)
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.server.kuksa.common import (
    actuation_target,
    kuksa_caller,
    resolve_path,
    visible_name,
)
from vehicle_middleware.server.kuksa.entries import Entries
from vehicle_middleware.server.kuksa.entries_reference import EntryMessages
from vehicle_middleware.server.kuksa.info import SERVER_NAME, SERVER_VERSION
from vehicle_middleware.server.kuksa.ingest import FloatRows, parse
from vehicle_middleware.server.kuksa.ingest_reference import PublishMessages
from vehicle_middleware.server.kuksa.provider_filters import ProviderFilters
from vehicle_middleware.server.kuksa.subscriptions import KuksaSubscriptions
from vehicle_middleware.server.rpc.convert import check_count
from vehicle_middleware.server.rpc.decoding import Malformed
from vehicle_middleware.server.rpc.status import check_decoded, maps_errors
from vehicle_middleware.server.signals import Signals
from vehicle_middleware.server.write_path import WritePath
from vehicle_middleware.vstore import UnknownKeyError, UpdateRow, VStore, VStoreError

__all__ = ["PRE_ENCODED", "KuksaV2", "provider_request"]

PRE_ENCODED: Final = frozenset({"Subscribe", "SubscribeById"})
"""The methods whose responses the servicer writes as bytes it encoded itself
(:class:`vehicle_middleware.server.codecs.EntryEncoder`): their handlers pass them on as they
are."""

_ENTRIES: Final[dict[codecs.Codecs, codecs.EntryEncoderFactory]] = {
    codecs.Codecs.FAST: Entries,
    codecs.Codecs.REFERENCE: EntryMessages,
}
"""A subscription's encoder, by the implementation selected
(:func:`vehicle_middleware.server.codecs.select`)."""

_READERS: Final[dict[codecs.Codecs, codecs.PublishReaderFactory[Any]]] = {
    codecs.Codecs.FAST: FloatRows,
    codecs.Codecs.REFERENCE: PublishMessages,
}
"""The servicer's reader of publishes, by the implementation selected."""

_Request = val_pb2.OpenProviderStreamRequest | codecs.Publish
"""A provider's request as :func:`provider_request` decoded it."""


def provider_request(
    raw: bytes, *, read: Callable[[bytes], codecs.Publish | None] = parse
) -> _Request:
    """A provider's request: a publish as ``read`` read it where it reads one
    (:class:`vehicle_middleware.server.codecs.PublishReader`), else protobuf's message."""
    published = read(raw)
    if published is not None:
        return published
    return val_pb2.OpenProviderStreamRequest.FromString(raw)


def _decoded(raw: bytes) -> val_pb2.OpenProviderStreamRequest:
    """A publish the reader left to protobuf, decoded; one that does not decode is
    refused as :class:`~vehicle_middleware.server.rpc.decoding.DecodeGuard` refuses any request."""
    try:
        return val_pb2.OpenProviderStreamRequest.FromString(raw)
    except (DecodeError, UnicodeDecodeError, ValueError) as e:
        check_decoded(Malformed(_OPEN_PROVIDER_STREAM, str(e) or type(e).__name__))
        raise  # (check_decoded raised)


_OPEN_PROVIDER_STREAM: Final = "/kuksa.val.v2.VAL/OpenProviderStream"


class KuksaV2(val_pb2_grpc.VALServicer):
    def __init__(
        self,
        *,
        authenticator: Authenticator,
        store: VStore,
        writes: WritePath,
        claims: WriteClaims,
        rate_limits: RateLimits,
        subscriptions: KuksaSubscriptions,
        limits: RequestLimits,
        signals: Signals,
        actuation: Actuation,
        demand: DemandPublisher,
    ) -> None:
        self._authenticator = authenticator
        self._demand = demand
        self._store = store
        self._writes = writes
        self._claims = claims
        self._rate_limits = rate_limits
        self._subscriptions = subscriptions
        self._limits = limits
        self._signals = signals
        self._actuation = actuation
        # The reader is the servicer's: its decoder (decoders()) and its rows go together.
        self._floats = _READERS[codecs.selected()](
            store.name_of, signals.get, lambda: store.removals
        )

    def decoders(self) -> Mapping[str, Callable[[bytes], Any]]:
        """The methods whose requests the servicer decodes itself, and how: a
        provider's publishes by the servicer's reader."""

        def request(raw: bytes) -> _Request:
            return provider_request(raw, read=self._floats.parse)

        return {"OpenProviderStream": request}

    # -- reading ---------------------------------------------------------------------

    @maps_errors()
    async def GetServerInfo(
        self, request: val_pb2.GetServerInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.GetServerInfoResponse:
        kuksa_caller(context, self._authenticator)
        return val_pb2.GetServerInfoResponse(name=SERVER_NAME, version=SERVER_VERSION)

    @maps_errors()
    async def GetValue(
        self, request: val_pb2.GetValueRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.GetValueResponse:
        who = kuksa_caller(context, self._authenticator)
        return val_pb2.GetValueResponse(data_point=self._datapoint(who, request.signal_id))

    @maps_errors(field="signal_ids")
    async def GetValues(
        self, request: val_pb2.GetValuesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.GetValuesResponse:
        who = kuksa_caller(context, self._authenticator)
        self._check_count("signal_ids", request.signal_ids)
        points = []
        for i, signal_id in enumerate(request.signal_ids):
            try:
                points.append(self._datapoint(who, signal_id, field=f"signal_ids[{i}]"))
            except UnknownKeyError as e:
                e.index = i
                raise
        return val_pb2.GetValuesResponse(data_points=points)

    def _datapoint(
        self, who: Caller, signal_id: types_pb2.SignalID, field: str = "signal_id"
    ) -> types_pb2.Datapoint:
        name = visible_name(signal_id, self._store, who)
        require(who, "read", name, field=field)
        entry = self._store.get(name)
        point = types_pb2.Datapoint()
        if convert.set_wire(point.value, entry.data, self._signals.get(name)):
            convert.set_timestamp(point.timestamp, entry.time_ns)
        return point

    @maps_errors()
    async def ListMetadata(
        self, request: val_pb2.ListMetadataRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.ListMetadataResponse:
        who = kuksa_caller(context, self._authenticator)
        store = self._store
        found = [
            (name, key_id)
            for name, key_id in await resolve_path(store, request.root)
            if who.grants.allows("read", name)
        ]
        if not found:
            raise UnknownKeyError(request.root)
        limit = self._limits.max_message_bytes // 400
        if len(found) > limit:
            raise LimitExceededError(
                "metadata entries per response", limit, f"{request.root!r} matches {len(found)}"
            )
        return val_pb2.ListMetadataResponse(
            metadata=[
                convert.metadata_v2(name, key_id, self._signals.get(name), store.peek(key_id)[0])
                for name, key_id in found
            ]
        )

    # -- writing ---------------------------------------------------------------------

    @maps_errors()
    async def PublishValue(
        self, request: val_pb2.PublishValueRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.PublishValueResponse:
        who = kuksa_caller(context, self._authenticator)
        name = visible_name(request.signal_id, self._store, who)
        self._write(who, name, request.data_point, "signal_id")
        return val_pb2.PublishValueResponse()

    def _write(self, who: Caller, name: str, point: types_pb2.Datapoint, field: str) -> None:
        store = self._store
        self._claims.check_write(who, name, field=field)
        if name not in store:
            raise UnknownKeyError(name)
        data = convert.to_store(name, self._signals.get(name), point.value, "typed_value")
        time_ns = convert.source_time(point, "data_point")
        with self._writes.writing(who.app):
            store.set(name, data, time_ns=time_ns)

    # -- actuation -------------------------------------------------------------------

    @maps_errors()
    async def Actuate(
        self, request: val_pb2.ActuateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.ActuateResponse:
        who = kuksa_caller(context, self._authenticator)
        name = visible_name(request.signal_id, self._store, who)
        target = actuation_target(
            self._actuation, self._signals, who, name, request.value, "signal_id"
        )
        await self._actuation.actuate([target])
        return val_pb2.ActuateResponse()

    @maps_errors()
    async def ActuateStream(
        self,
        requests: AsyncIterator[val_pb2.ActuateRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> val_pb2.ActuateResponse:
        kuksa_caller(context, self._authenticator)
        raise NotServedError(
            "kuksa.val.v2.VAL/ActuateStream", "actuate with Actuate or BatchActuate"
        )

    @maps_errors(field="actuate_requests")
    async def BatchActuate(
        self, request: val_pb2.BatchActuateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> val_pb2.BatchActuateResponse:
        who = kuksa_caller(context, self._authenticator)
        self._check_count("actuate_requests", request.actuate_requests)
        targets = []
        for i, r in enumerate(request.actuate_requests):
            where = f"actuate_requests[{i}]"
            name = visible_name(r.signal_id, self._store, who)
            targets.append(
                actuation_target(self._actuation, self._signals, who, name, r.value, where)
            )
        await self._actuation.actuate(targets)
        return val_pb2.BatchActuateResponse()

    @maps_errors()
    async def OpenProviderStream(
        self,
        request_iterator: AsyncIterator[_Request],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        who = kuksa_caller(context, self._authenticator)
        stream: ActuatorProvider[val_pb2.OpenProviderStreamResponse] = ActuatorProvider(
            who.app, lambda forward: convert.actuation_request(forward, self._signals.get)
        )
        filters = ProviderFilters(who.app, self._demand, stream.outbox.put)
        reader = asyncio.create_task(
            self._provider_requests(who, stream, request_iterator, filters)
        )
        try:
            await self._actuation.serve(stream, reader, context.write)
        finally:
            await filters.close()

    async def _provider_requests(
        self,
        who: Caller,
        stream: ActuatorProvider[val_pb2.OpenProviderStreamResponse],
        requests: AsyncIterator[_Request],
        filters: ProviderFilters,
    ) -> None:
        store = self._store
        pace = self._rate_limits.publish_pace(who.app)
        published = 0
        provided: set[int] = set()  # the key ids it published or provides: what it can fail
        async for request in requests:
            check_decoded(request)
            if not isinstance(request, val_pb2.OpenProviderStreamRequest):  # read by the reader
                pace.take(published)
                published += 1
                provided.update(request.points)
                if not self._publish_floats(who, request):  # protobuf's way judges it
                    decoded = _decoded(request.raw)
                    await self._publish(who, decoded.publish_values_request, stream)
                continue
            action = request.WhichOneof("action")
            if action == "provide_actuation_request":
                ids = request.provide_actuation_request.actuator_identifiers
                self._check_count("provide_actuation_request.actuator_identifiers", ids)
                names = [visible_name(i, store, who) for i in ids]
                self._actuation.claim(who, stream, names)
                provided.update(store.id_of(name) or 0 for name in names)
                await stream.outbox.put(
                    val_pb2.OpenProviderStreamResponse(
                        provide_actuation_response=val_pb2.ProvideActuationResponse()
                    )
                )
            elif action == "publish_values_request":
                pace.take(published)  # the own Publish stream's limits, the same here
                published += 1
                provided.update(request.publish_values_request.data_points)
                await self._publish(who, request.publish_values_request, stream)
            elif action == "batch_actuate_stream_response":
                answer = request.batch_actuate_stream_response
                try:
                    name = convert.signal_name(answer.signal_id, store.name_of)
                except Exception:
                    continue  # an answer about a key that went away
                key_id = store.id_of(name) or 0
                error = answer.error if answer.HasField("error") else None
                self._actuation.answered_key(stream, key_id, convert.refusal(error))
            elif action == "provide_signal_request":
                intervals = request.provide_signal_request.signals_sample_intervals
                declared = self._provided_signals(who, intervals)
                provided.update(declared)
                await stream.outbox.put(
                    val_pb2.OpenProviderStreamResponse(
                        provide_signal_response=val_pb2.ProvideSignalResponse()
                    )
                )
                filters.provide({i: s.interval_ms for i, s in intervals.items()}, declared)
            elif action == "update_filter_response":
                filters.answered(request.update_filter_response)
            elif action == "provider_error_indication":
                if not provided:  # the databroker, too, ends the stream: ABORTED
                    raise NothingProvidedError("provider_error_indication")
                code = request.provider_error_indication.provider_error
                self._provider_failed(who, provided, convert.provider_failure(code))
            # Provider-value answers: nothing asks for them here.

    def _provided_signals(
        self, who: Caller, intervals: Mapping[int, types_pb2.SampleInterval]
    ) -> dict[int, str]:
        """The names of the signals a ProvideSignalRequest declares, by id.

        Raises:
            InvalidRequestError: more signals than a request may name.
            UnknownKeyError: an id no key has (or of a key the caller may neither
                read nor provide: the same answer, as for a publish by id).
            PermissionDeniedError: no provide scope for a signal.
        """
        field = "provide_signal_request.signals_sample_intervals"
        if len(intervals) > self._limits.max_keys_per_request:
            raise InvalidRequestError(
                field,
                f"at most {self._limits.max_keys_per_request} per request, got {len(intervals)}",
            )
        names: dict[int, str] = {}
        grants = who.grants
        for key_id in sorted(intervals):
            name = self._store.name_of(key_id)
            if name is None or not (grants.allows("provide", name) or grants.allows("read", name)):
                raise UnknownKeyError(key_id)
            require(who, "provide", name, field=f"{field}[{key_id}]")
            names[key_id] = name
        return names

    def _provider_failed(self, who: Caller, provided: set[int], failure: bytes) -> None:
        """A provider's ``ProviderErrorIndication``: every key its stream published
        or provides, that it may still write, gets ``failure`` in one write (a
        datapoint without a value to KUKSA readers); keys removed or claimed by
        another since are left as they are, as the databroker leaves those it
        cannot update."""
        store = self._store
        checks = self._claims.checks_writes(who)
        failing: list[int] = []
        for key_id in sorted(provided):
            name = store.name_of(key_id) if key_id > 0 else None
            if name is None:
                continue
            if checks:
                try:
                    self._claims.check_write(who, name)
                except PermissionError:
                    continue
            failing.append(key_id)
        if not failing:
            return
        with self._writes.writing(who.app):  # one request: one journal record
            for key_id in failing:  # one by one: a key's refusal leaves the others failed
                with contextlib.suppress(VStoreError):
                    store.set(key_id, failure)

    async def _publish(
        self,
        who: Caller,
        publish: val_pb2.PublishValuesRequest,
        stream: ActuatorProvider[val_pb2.OpenProviderStreamResponse],
    ) -> None:
        limit = self._limits.max_keys_per_request
        if len(publish.data_points) > limit:
            raise InvalidRequestError(
                "publish_values_request.data_points",
                f"at most {limit} per request, got {len(publish.data_points)}",
            )
        response = self._publish_values(who, publish)
        if response.status:  # as the databroker: answered only when a signal failed
            await stream.outbox.put(
                val_pb2.OpenProviderStreamResponse(publish_values_response=response)
            )

    def _publish_floats(self, who: Caller, published: codecs.Publish) -> bool:
        """Write a publish of floats as :meth:`_publish_values` would, where every
        signal takes its value at a glance (:class:`FloatRows`) and nobody's access
        is checked; False (nothing written) where protobuf's way must judge it."""
        if len(published.points) > self._limits.max_keys_per_request:
            return False
        if self._claims.checks_writes(who):
            return False
        batch = self._floats.rows(published)
        if batch is None:
            return False
        if batch:
            try:
                with self._writes.writing(who.app):
                    self._store.write_many(batch)
            except VStoreError:  # refused as a whole, nothing written: said per signal there
                return False
        return True

    def _publish_values(
        self, who: Caller, publish: val_pb2.PublishValuesRequest
    ) -> val_pb2.PublishValuesResponse:
        """Write one ``PublishValuesRequest`` as one request (one journal record, one
        replicated event); a signal refused is reported in ``status`` by its id, as
        KUKSA does, and the others are written. The response goes to the provider
        only when ``status`` is not empty: the KUKSA databroker answers a publish
        that failed, and nothing upon success."""
        store = self._store
        response = val_pb2.PublishValuesResponse(request_id=publish.request_id)
        batch: list[UpdateRow] = []
        checks = self._claims.checks_writes(who)  # False: every key, no claims
        # Each datapoint checked as _write checks one; the lookups bound once, as a
        # message of 84 signals runs this 84 times.
        name_of, signal_of, to_store, source_time = (
            store.name_of,
            self._signals.get,
            convert.to_store,
            convert.source_time,
        )
        points = publish.data_points
        for key_id in points:  # not items(): its view is Python code
            point = points[key_id]
            try:
                name = name_of(key_id) if key_id > 0 else None
                if name is None or (checks and not who.grants.allows("read", name)):
                    raise UnknownKeyError(key_id)  # no key, or not readable: one answer
                if checks:
                    self._claims.check_write(who, name, field=f"data_points[{key_id}]")
                data = to_store(name, signal_of(name), point.value, "typed_value")
                batch.append((key_id, data, None, source_time(point, "data_point")))
            except Exception as e:  # reported per signal
                response.status[key_id].CopyFrom(convert.v2_error(e))
        if not batch:
            return response
        try:
            with self._writes.writing(who.app):
                store.write_many(batch)
        except VStoreError:  # refused as a whole (checked above: rare): one by one, to say which
            for u in batch:
                try:
                    with self._writes.writing(who.app):
                        store.set(u[0], u[1], time_ns=u[3])
                except VStoreError as e:
                    response.status[u[0]].CopyFrom(convert.v2_error(e))  # type: ignore[index]
        return response

    # -- subscriptions ---------------------------------------------------------------

    @maps_errors(field="signal_paths")
    async def Subscribe(
        self, request: val_pb2.SubscribeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who = kuksa_caller(context, self._authenticator)
        flt, duration = convert.subscribe_filter(request)
        entries = self._entries(val_pb2.SubscribeResponse, by_name=True)
        await self._stream(
            who,
            list(request.signal_paths),
            request.buffer_size,
            context,
            entries,
            flt=flt,
            duration=duration,
        )

    @maps_errors(field="signal_ids")
    async def SubscribeById(
        self, request: val_pb2.SubscribeByIdRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        who = kuksa_caller(context, self._authenticator)
        flt, duration = convert.subscribe_filter(request)
        self._subscriptions.check_count("signal_ids", len(request.signal_ids))
        names = []
        for i, key_id in enumerate(request.signal_ids):
            name = self._store.name_of(key_id) if key_id > 0 else None
            if name is None or not who.grants.allows("read", name):  # the same answer
                e = UnknownKeyError(key_id)
                e.index = i
                raise e
            names.append(name)
        entries = self._entries(val_pb2.SubscribeByIdResponse, by_name=False)
        await self._stream(
            who,
            names,
            request.buffer_size,
            context,
            entries,
            field="signal_ids",
            flt=flt,
            duration=duration,
        )

    def _entries(self, response: type[Message], *, by_name: bool) -> codecs.EntryEncoder:
        return _ENTRIES[codecs.selected()](
            response, by_name=by_name, name_of=self._store.name_of, signal_of=self._signals.get
        )

    async def _stream(
        self,
        who: Caller,
        names: list[str],
        buffer_size: int,
        context: grpc.aio.ServicerContext[Any, Any],
        entries: codecs.EntryEncoder,
        field: str = "signal_paths",
        *,
        flt: Filter | None = None,
        duration: float | None = None,
    ) -> None:
        """Each drained batch as one response, written as the bytes ``entries`` builds
        (the method's handler takes them as they are: see :data:`PRE_ENCODED`). With
        ``duration`` (s), the call ends with OK that long after it began."""
        async with contextlib.aclosing(
            self._subscriptions.updates(who, names, buffer_size, field, flt=flt)
        ) as stream:
            deadline = asyncio.timeout(duration)
            try:
                async with deadline:
                    async for batch in stream:
                        await context.write(entries.encode(batch))
            except TimeoutError:
                if not deadline.expired():
                    raise  # not the call's duration

    def _check_count(self, field: str, items: Sequence[Any]) -> None:
        check_count(field, items, self._limits.max_keys_per_request)
