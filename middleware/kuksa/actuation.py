"""Actuation: providers claim actuators on their ``OpenProviderStream``; requests go to them.

A provider claims actuators with ``ProvideActuationRequest`` (``provide``
scope on each; one provider per actuator: another's claim is ALREADY_EXISTS;
the claims end with the stream). ``Actuate``, ``BatchActuate`` and a v1
``Set`` of a target check every request first (the key exists, is an
actuator when a catalog says what it is, the caller has ``actuate`` scope, the
value fits the actuator's datatype and rule), then put one
``BatchActuateStreamRequest`` per provider on its stream and return when
each was delivered, within ``actuation_timeout_s``. A provider that answers
(``BatchActuateStreamResponse``, per signal) is waited for: its error is the
caller's. One that never answered (as KUKSA's own providers do not) is
taken at its delivery, as the KUKSA databroker does. No provider, or no
delivery or answer in time: UNAVAILABLE.

The last target asked for each actuator is kept (v1 ``VIEW_TARGET_VALUE``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from middleware.access import Access, Caller
from middleware.errors import (
    ActuationUnavailableError,
    AlreadyProvidedError,
    InvalidRequestError,
)
from middleware.signals import Signals
from vehicle.kuksa.val.v2 import types_pb2, val_pb2
from vstore import InvalidValueError, UnknownKeyError, VStore

__all__ = ["Actuation", "ProviderStream", "Target"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Target:
    """One actuation asked for: the key, its id, the wire value and its stored bytes."""

    name: str
    key_id: int
    value: types_pb2.Value
    data: bytes


@dataclass(eq=False)
class ProviderStream:
    """One provider's open ``OpenProviderStream``: what goes out, and what it owes."""

    app: str
    outbox: asyncio.Queue[val_pb2.OpenProviderStreamResponse] = field(
        default_factory=lambda: asyncio.Queue(maxsize=1000)
    )
    answers: bool = False
    """Whether it ever answered an actuation (then it is waited for)."""
    pending: dict[int, deque[asyncio.Future[types_pb2.Error | None]]] = field(
        default_factory=lambda: defaultdict(deque)
    )


class Actuation:
    """The actuators' providers, and the forwarding of requests to them."""

    def __init__(self, store: VStore, signals: Signals, access: Access, timeout_s: float) -> None:
        self._store = store
        self._signals = signals
        self._access = access
        self._timeout = timeout_s
        self._providers: dict[str, ProviderStream] = {}
        self.targets: dict[str, tuple[bytes, int]] = {}
        """Key name -> (stored bytes, time) of the last target asked for."""

    def claim(self, who: Caller, stream: ProviderStream, names: Sequence[str]) -> None:
        """Make ``stream`` the provider of actuators ``names``; all or nothing.

        Raises:
            PermissionDeniedError: no ``provide`` scope on one.
            UnknownKeyError: one is not a key.
            InvalidRequestError: a catalog says one is not an actuator.
            AlreadyProvidedError: another stream provides one.
        """
        for i, name in enumerate(names):
            field_name = f"actuator_identifiers[{i}]"
            self._access.check(who, "provide", name, field=field_name)
            self._actuator(name, field_name)
            owner = self._providers.get(name)
            if owner is not None and owner is not stream:
                raise AlreadyProvidedError(name, owner.app)
        for name in names:
            self._providers[name] = stream
        log.info("app %s provides %d actuators", stream.app, len(names))

    def release(self, stream: ProviderStream) -> None:
        """The stream ended: its claims end; whoever waits for it is told."""
        for name in [n for n, s in self._providers.items() if s is stream]:
            del self._providers[name]
        for waiting in stream.pending.values():
            for future in waiting:
                if not future.done():
                    future.set_exception(
                        ActuationUnavailableError("?", f"provider {stream.app!r} went away")
                    )

    def _actuator(self, name: str, field_name: str) -> int:
        key_id = self._store.id_of(name)
        if key_id is None:
            raise UnknownKeyError(name)
        signal = self._signals.get(name)
        if signal is not None and signal.type != "actuator":
            raise InvalidRequestError(field_name, f"{name!r} is a {signal.type}, not an actuator")
        return key_id

    def check(self, who: Caller, name: str, value: types_pb2.Value, field_name: str) -> Target:
        """One request, checked; nothing is sent.

        Raises:
            PermissionDeniedError, UnknownKeyError, InvalidRequestError, InvalidValueError.
        """
        from middleware.kuksa.convert import to_store

        self._access.check(who, "actuate", name, field=field_name)
        key_id = self._actuator(name, field_name)
        data = to_store(name, self._signals.get(name), value, "typed_value")
        return Target(name, key_id, value, data)

    async def actuate(self, targets: Sequence[Target]) -> None:
        """Forward checked requests to their providers; return when they took them.

        Raises:
            ActuationUnavailableError: no provider, or no delivery/answer in time.
            InvalidValueError, InvalidRequestError: the provider refused (its message).
        """
        by_stream: dict[int, tuple[ProviderStream, list[Target]]] = {}
        for t in targets:
            stream = self._providers.get(t.name)
            if stream is None:
                raise ActuationUnavailableError(t.name, "no provider provides this actuator")
            by_stream.setdefault(id(stream), (stream, []))[1].append(t)
        now = time.time_ns()
        for t in targets:
            self.targets[t.name] = (t.data, now)
        waits: list[asyncio.Future[types_pb2.Error | None]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        for stream, mine in by_stream.values():
            request = val_pb2.BatchActuateStreamRequest(
                actuate_requests=[
                    val_pb2.ActuateRequest(signal_id=types_pb2.SignalID(id=t.key_id), value=t.value)
                    for t in mine
                ]
            )
            if stream.answers:
                for t in mine:
                    future: asyncio.Future[types_pb2.Error | None] = loop.create_future()
                    stream.pending[t.key_id].append(future)
                    waits.append(future)
            try:
                await asyncio.wait_for(
                    stream.outbox.put(
                        val_pb2.OpenProviderStreamResponse(batch_actuate_stream_request=request)
                    ),
                    max(0.0, deadline - loop.time()),
                )
            except TimeoutError:
                raise ActuationUnavailableError(
                    mine[0].name, f"provider {stream.app!r} did not take it in time"
                ) from None
        for t, future in zip(
            [t for s, m in by_stream.values() if s.answers for t in m], waits, strict=True
        ):
            try:
                error = await asyncio.wait_for(future, max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise ActuationUnavailableError(
                    t.name, f"its provider did not answer within {self._timeout:g} s"
                ) from None
            if error is not None and error.code not in (
                types_pb2.ERROR_CODE_OK,
                types_pb2.ERROR_CODE_UNSPECIFIED,
            ):
                raise InvalidValueError(
                    t.name, f"the provider refused it: {error.message or error.code}"
                )

    def answered(self, stream: ProviderStream, key_id: int, error: types_pb2.Error | None) -> None:
        """The provider answered the oldest open request for ``key_id``."""
        stream.answers = True
        waiting = stream.pending.get(key_id)
        while waiting:
            future = waiting.popleft()
            if not future.done():
                future.set_result(error)
                return
