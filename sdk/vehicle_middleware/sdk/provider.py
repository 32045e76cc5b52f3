"""The provider SDK: add keys, publish values over the Publish stream, provide actuators.

    async with ProviderClient("127.0.0.1:50051", "vehicle-sim") as p:
        await p.add_keys(["Vehicle.Speed"])
        await p.publish({"Vehicle.Speed": b"..."})
        await p.provide_actuators(["Vehicle.Cabin.Infotainment.Volume"], set_volume)
        async for changed in p.demand(["Vehicle.Speed"]):
            ...  # sample what is watched, no faster than asked

Values are published by key id on one client-streaming ``Publish`` call (the
names are translated here). When the middleware goes away the client
reconnects with backoff, adds its keys again (ids may change after a restart)
and re-sends the batch that failed; values are state, so a batch written twice
is harmless. :meth:`flush` ends the stream and waits for the middleware to
confirm everything written so far. Actuators are claimed and their requests
answered on a stream of their own (:mod:`vehicle_middleware.sdk.actuators`), and
the demand of its keys followed on another (:mod:`vehicle_middleware.sdk.demand`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence

import grpc
from vehicle_middleware.contract.channel import (
    RETRYABLE,
    Backoff,
    Tls,
    metadata,
    open_channel,
    retry_unary,
)
from vehicle_middleware.contract.values import Failure, FailureCode, encode
from vehicle_middleware.contract.wire import KEYS_VERSION_HEADER
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import write_races
from vehicle_middleware.sdk.actuators import ActuationHandler, ActuatorStream
from vehicle_middleware.sdk.demand import KeyDemand, follow_demand
from vehicle_middleware.sdk.errors import MiddlewareUnreachableError

__all__ = [
    "ConflictError",
    "HeadConflictError",
    "ProviderClient",
    "PublishRefusedError",
]

log = logging.getLogger(__name__)


class ConflictError(Exception):
    """A compare-and-set write lost: the key's version moved on."""

    def __init__(self, key: str, current: int) -> None:
        self.key = key
        self.current = current
        super().__init__(f"{key}: version is now {current}")


class HeadConflictError(Exception):
    """A write guarded by ``if_head`` lost: something was written since that head.

    ``head`` is the newest head: read what changed, then write again with it.
    """

    def __init__(self, key: str, head: str) -> None:
        self.key = key
        self.head = head
        super().__init__(f"{key}: the head moved on (now {head[:12]})")


class PublishRefusedError(Exception):
    """The middleware refused a batch on the Publish stream.

    A client stream reports a refusal only when the next write finds the stream
    ended, so the refused batch may be an earlier one; the batch being written
    when this is raised was not sent.
    """

    def __init__(
        self, code: grpc.StatusCode, details: str | None, *, flushing: bool = False
    ) -> None:
        self.code = code
        self.details = details or ""
        then = (
            "found when flushing: what was published since the last flush may not be written"
            if flushing
            else "the batch being written was not sent"
        )
        super().__init__(
            f"the middleware refused a batch on the Publish stream ({code.name}: "
            f"{self.details}); {then}"
        )


class ProviderClient:
    """A provider's connection to the middleware's VStore service."""

    def __init__(
        self,
        target: str,
        app_id: str,
        *,
        reconnect: bool = True,
        token: str | None = None,
        tls: Tls | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        """Args:
        target: the middleware's address, e.g. ``127.0.0.1:50051`` or ``unix:/path``.
        app_id: this provider's identity (``app-id`` metadata).
        reconnect: reconnect and re-send after failures (else raise).
        token: a JWT for a middleware in token mode (sent as a Bearer token).
        tls: TLS to a middleware that serves it (with a client certificate:
            mutual TLS, where the certificate names this provider).
        connect_timeout: how long the first call that waits for the middleware
            (``add_keys``, the first ``publish``) waits before raising
            :class:`MiddlewareUnreachableError` (once it answered, a provider that
            reconnects waits for it to come back); ``set`` and ``get`` fail at
            once with UNAVAILABLE.
        """
        self.app_id = app_id
        self._target = target
        self._tls = tls
        self._connect_timeout = connect_timeout
        self._reached = False
        self._md = metadata(app_id, token)
        self._claimed: set[str] = set()
        self._keys_version: str | None = None
        self._stream_values: dict[str, tuple[bytes, int | None]] = {}
        """Latest value of each key written on the current stream, for a re-send."""
        self._channel = open_channel(target, tls=tls)
        self._stub = vstore_pb2_grpc.VStoreStub(self._channel)
        self._actuation = actuation_pb2_grpc.ActuationStub(self._channel)
        self._actuators: list[ActuatorStream] = []
        self._reconnect_enabled = reconnect
        self.ids: dict[str, int] = {}
        """Name -> id of every key this provider added (refreshed after a restart)."""
        self._call: (
            grpc.aio.StreamUnaryCall[vstore_pb2.PublishRequest, vstore_pb2.PublishSummary] | None
        ) = None
        self.head = ""
        """The newest head this client was told (Set, Get and Publish answers):
        give it as ``if_head`` to write only if nothing was written since."""
        self.reconnects = 0
        self.published = 0
        """Updates written to the stream (including re-sent ones)."""

    async def __aenter__(self) -> ProviderClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """End the actuator streams, flush what was published, then close the channel."""
        try:
            for stream in self._actuators:
                await stream.close()
            if self._call is not None:
                await self._end_stream(going_on=False)  # leaving: the claims end now
        finally:
            await self._channel.close()

    async def provide_actuators(
        self, names: Sequence[str], handler: ActuationHandler
    ) -> ActuatorStream:
        """Claim actuators ``names`` and answer their requests with ``handler``.

        ``handler(request)`` (sync or async) gets each request's targets (name ->
        value bytes) in order, one request at a time, and returns once they are
        done, or raises :class:`~vehicle_middleware.sdk.actuators.ActuationRefusedError`
        (the caller's INVALID_ARGUMENT, with its reason). It must answer within
        the middleware's ``actuation_timeout_s`` (5 s): the caller waits. The
        claim holds until :meth:`close` (or the returned stream's ``close()``);
        after a middleware restart it is made again. Needs ``provide`` scope.

        Raises:
            grpc.aio.AioRpcError: the claim was refused: ALREADY_EXISTS (another
                provider's, named), PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT
                (not an actuator).
        """
        stream = ActuatorStream(
            self._actuation,
            self._md,
            names,
            handler,
            reconnect=self._reconnect_enabled,
            app_id=self.app_id,
        )
        await stream.start()
        self._actuators.append(stream)
        return stream

    def demand(self, names: Iterable[str]) -> AsyncIterator[dict[str, KeyDemand]]:
        """Follow the demand of keys this provider provides (added before).

        ``async for changed in provider.demand(names)`` gets name ->
        :class:`~vehicle_middleware.sdk.demand.KeyDemand`: every key first, then
        the keys whose demand changed (an app subscribed, left, or asked another
        interval), at most one dict per the middleware's ``demand_interval_s``.
        A key nobody watches need not be sampled; a watched one need not be
        sampled faster than its ``min_interval_s`` (0: every write is wanted).
        Reconnects as the client does, then yields every key again. A middleware
        without the call yields every key once as watched, every write wanted,
        and ends. Needs ``provide`` scope for every key; the stream counts as one
        of the provider's Publish streams.

        Raises:
            grpc.aio.AioRpcError: refused (see :func:`vehicle_middleware.sdk.demand.follow_demand`).
        """
        return follow_demand(self._stub, self._md, list(names), reconnect=self._reconnect_enabled)

    async def add_keys(self, names: Iterable[str], *, claim: bool = False) -> dict[str, int]:
        """Add keys (idempotent); returns name -> id; remembered for reconnects.

        With ``claim``, nobody else may write them while this provider has its
        Publish stream open (the stream is opened here if needed); claims are
        made again after a reconnect.
        """
        names = list(names)
        await self._reach()
        request = vstore_pb2.AddKeysRequest(names=names, claim=claim)
        response = await retry_unary(
            lambda: self._stub.AddKeys(request, metadata=self._md, wait_for_ready=True),
            idempotent=True,
        )
        added = {k.name: k.id for k in response.keys}
        if response.keys_version != self._keys_version:
            # Ids of keys added earlier may have changed too: refresh them all.
            self._keys_version = response.keys_version
            if self.ids.keys() - added.keys():
                await self._readd()
        self.ids.update(added)
        if claim:
            self._claimed.update(names)
            await self._ensure_stream()  # a claim lasts while this provider has a stream open
        return added

    async def _reach(self) -> None:
        """Before the first call: wait for the middleware, at most ``connect_timeout``.

        Raises:
            MiddlewareUnreachableError: it did not answer (the calls would wait forever).
        """
        if self._reached:
            return
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self._connect_timeout)
        except TimeoutError:
            raise MiddlewareUnreachableError(
                self._target, self._connect_timeout, tls=self._tls is not None
            ) from None
        self._reached = True

    async def remove_keys(self, names: Iterable[str]) -> list[str]:
        """Remove keys; returns the names that did not exist."""
        names = list(names)
        request = vstore_pb2.RemoveKeysRequest(names=names)
        # Not idempotent (a second try reports the keys as not found): retried only
        # when refused before the middleware saw it.
        response = await retry_unary(
            lambda: self._stub.RemoveKeys(request, metadata=self._md), idempotent=False
        )
        for name in names:
            self.ids.pop(name, None)
        return list(response.not_found)

    async def publish(
        self,
        values: Mapping[str, bytes] | Sequence[tuple[str, bytes]],
        *,
        time_ns: int | None = None,
    ) -> None:
        """Write values by key name (keys must have been added by this client).

        Raises:
            KeyError: a name this client did not add.
            grpc.aio.AioRpcError: the middleware refused the batch (bad input).
        """
        items = values.items() if isinstance(values, Mapping) else values
        named = list(items)
        if not named:
            return
        for name, _ in named:
            if name not in self.ids:
                raise KeyError(f"{name!r}: add_keys() it first")
        while True:
            await self._ensure_stream()  # first: opening one may refresh the ids
            if await self._write(self._batch(named, time_ns)):
                for name, data in named:
                    self._stream_values[name] = (data, time_ns)
                return
            await self._recover()
            await self._resend()

    async def fail(
        self,
        name: str,
        code: FailureCode,
        detail: str = "",
        *,
        time_ns: int | None = None,
    ) -> None:
        """Say that key ``name`` has no valid value now, and why: publish a
        :class:`~vehicle_middleware.contract.values.Failure` in place of a value.

        A failure is a write like any other (a version, an event for every
        subscriber, the key is not stale); the next value published ends it. A
        batch of :meth:`publish` may carry failures too, as
        ``encode(Failure(code, detail))``.

        Raises:
            KeyError: a name this client did not add.
            ValueEncodingError: ``detail`` longer than
                :data:`~vehicle_middleware.contract.values.FAILURE_DETAIL_MAX` characters.
            grpc.aio.AioRpcError: the middleware refused the batch.
        """
        await self.publish({name: encode(Failure(code, detail))}, time_ns=time_ns)

    def _batch(
        self, named: Sequence[tuple[str, bytes]], time_ns: int | None
    ) -> vstore_pb2.PublishRequest:
        return vstore_pb2.PublishRequest(
            updates=[
                vstore_pb2.IdUpdate(id=self.ids[name], data=data, time_ns=time_ns)
                if time_ns is not None
                else vstore_pb2.IdUpdate(id=self.ids[name], data=data)
                for name, data in named
            ]
        )

    async def _resend(self) -> None:
        """After a refused stream: write again the latest value of each key it carried.

        Which of its batches the middleware applied is unknown, so each key's
        latest value is written once more (at least once; an ``on_update``
        subscriber may see it twice).
        """
        values, self._stream_values = self._stream_values, {}
        for (data, time_ns), group in itertools.groupby(
            sorted(values.items(), key=lambda kv: kv[1][1] or 0), key=lambda kv: kv[1]
        ):
            named = [(name, data) for name, _ in group if name in self.ids]
            if named:
                await self.publish(named, time_ns=time_ns)

    async def flush(self) -> vstore_pb2.PublishSummary:
        """End the current Publish stream and wait for the middleware's summary.

        The provider's claims stay (for the middleware's ``claim_grace_s``, within
        which the next write opens a new stream): its apps hear nothing.

        Raises:
            PublishRefusedError: the middleware refused a batch of this stream (e.g.
                a key another provider claimed: PERMISSION_DENIED naming it).
            grpc.aio.AioRpcError: the middleware went away.
        """
        return await self._end_stream(going_on=True)

    async def _end_stream(self, *, going_on: bool) -> vstore_pb2.PublishSummary:
        """End the current Publish stream, saying ``flushing`` when the provider goes
        on (its claims then outlive the stream by the grace); its summary."""
        call, self._call = self._call, None
        if call is None:
            return vstore_pb2.PublishSummary()
        try:
            try:
                if going_on:
                    await call.write(vstore_pb2.PublishRequest(flushing=True))
                await call.done_writing()
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                # The middleware ended the call first (e.g. refusing a stale key id): a
                # write then fails with grpc's own INTERNAL; the call's status says why.
                pass
            summary: vstore_pb2.PublishSummary = await call
        except grpc.aio.AioRpcError as e:
            if e.code() is not grpc.StatusCode.FAILED_PRECONDITION or not self._reconnect_enabled:
                if e.code() in RETRYABLE:
                    raise  # the middleware went away: nothing was refused
                raise PublishRefusedError(e.code(), e.details(), flushing=True) from e
            # Key ids changed under the stream: write its values again with the new ids.
            await self._recover()
            await self._resend()
            return await self._end_stream(going_on=going_on)
        self._stream_values.clear()
        self.head = summary.head
        return summary

    async def set(
        self,
        name: str,
        data: bytes,
        *,
        if_version: int | None = None,
        if_head: str | None = None,
    ) -> int:
        """One unary write, optionally compare-and-set; returns the new version.

        ``if_version``: only if the key's version is this. ``if_head``: only if
        nothing was written anywhere since this head (:attr:`head` after a
        ``get``); on several nodes the answer waits for the cluster's verdict.

        Raises:
            ConflictError: ``if_version`` was stale.
            HeadConflictError: ``if_head`` was stale (:attr:`head` is the newest).
        """
        update = vstore_pb2.Update(name=name, data=data)
        if if_version is not None:
            update.if_version = if_version
        request = vstore_pb2.SetRequest(updates=[update])
        if if_head is not None:
            request.if_head = if_head
        # A write: retried only when refused before the middleware saw it.
        response = await retry_unary(
            lambda: self._stub.Set(request, metadata=self._md), idempotent=False
        )
        self.head = response.head
        result = response.results[0]
        if result.head_conflict:
            raise HeadConflictError(name, result.head)
        if result.conflict:
            raise ConflictError(name, result.version)
        return int(result.version)

    async def get(self, names: Sequence[str]) -> dict[str, vstore_pb2.Value]:
        """Current values by name (unknown names are left out); :attr:`head` is
        the head they are from."""
        request = vstore_pb2.GetRequest(names=list(names))
        response = await retry_unary(
            lambda: self._stub.Get(request, metadata=self._md), idempotent=True
        )
        self.head = response.head
        return {v.name: v for v in response.values}

    # -- internals ---------------------------------------------------------------

    async def _write(self, batch: vstore_pb2.PublishRequest) -> bool:
        """Write one batch; False if the stream broke in a way worth a retry."""
        call = await self._ensure_stream()
        # The middleware's answer lost to grpc's INTERNAL (vehicle_middleware.sdk.write_races).
        lost = False
        try:
            await call.write(batch)
        except grpc.aio.AioRpcError as e:
            lost = write_races.write_raced_end(e)
        except asyncio.InvalidStateError:
            pass
        else:
            self.published += len(batch.updates)
            return True
        self._call = None
        code = await call.code()
        # A lost answer is retried as a broken stream: the keys are added again first,
        # which a middleware that refuses this provider refuses with its own words.
        retry = code in RETRYABLE or code is grpc.StatusCode.FAILED_PRECONDITION or lost
        if retry and self._reconnect_enabled:
            return False
        details = await call.details()
        raise PublishRefusedError(code, details)

    async def _ensure_stream(
        self,
    ) -> grpc.aio.StreamUnaryCall[vstore_pb2.PublishRequest, vstore_pb2.PublishSummary]:
        """The open Publish stream, or a new one.

        Before opening one, the keys are added again: the middleware may have
        restarted or removed keys since, and ids are reused, so writing with
        the old ids could land in another key.
        """
        if self._call is None:
            await self._reach()
            if self.ids:
                await self._readd()
            md = self._md
            if self._keys_version is not None:
                md += ((KEYS_VERSION_HEADER, self._keys_version),)
            self._call = self._stub.Publish(metadata=md, wait_for_ready=True)
        return self._call

    async def _readd(self) -> None:
        """Add every key of this provider again (claims too); refresh ids and version."""
        ids: dict[str, int] = {}
        for claim in (False, True):
            group = [n for n in self.ids if (n in self._claimed) == claim]
            if group:
                response = await self._stub.AddKeys(
                    vstore_pb2.AddKeysRequest(names=group, claim=claim),
                    metadata=self._md,
                    wait_for_ready=True,
                    timeout=30,
                )
                ids.update({k.name: k.id for k in response.keys})
                self._keys_version = response.keys_version
        self.ids = ids

    async def _recover(self) -> None:
        """Reconnect and add the keys again (their ids may have changed)."""
        backoff = Backoff()
        while True:
            try:
                await self._readd()
            except grpc.aio.AioRpcError as e:
                if e.code() not in RETRYABLE:
                    raise
                await asyncio.sleep(backoff.delay())
                continue
            self.reconnects += 1
            log.info("provider %s: reconnected; %d keys added again", self.app_id, len(self.ids))
            return
