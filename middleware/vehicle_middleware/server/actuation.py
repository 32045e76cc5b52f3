"""Actuation, whatever the API: providers claim actuators; requests are checked and forwarded.

One core for both APIs that offer actuation: the project's own
(``vehicle.actuation.v1.Actuation``, :mod:`vehicle_middleware.server.rpc.actuation_service`)
and KUKSA's v2 ``OpenProviderStream``/``Actuate``/``BatchActuate`` and v1
``Set`` of targets (:mod:`vehicle_middleware.server.kuksa`). A request made through either
reaches a provider connected through either: values travel as the V-Store's
bytes (the ``vehicle.value.v1`` encoding of a typed key) and each API
translates at its edge (a provider's ``encode``).

Rules, the same on every path:

- a provider claims actuators (``provide`` scope on each; a key; an actuator
  when a catalog says what it is); one provider per actuator: another's claim
  is ALREADY_EXISTS; claims are all or nothing and end with the provider's
  stream;
- a request is checked first (the key exists, is an actuator, the caller has
  ``actuate`` scope, the value fits the value size limit and the key's
  datatype and rule), all of a batch before any is sent;
- it then goes to each provider concerned as one message, and the caller waits
  until each took it and, if that provider answers actuations, for its answer,
  all within ``actuation_timeout_s``; a refusal is the caller's
  INVALID_ARGUMENT (``value for 'K' refused: the provider refused it: ...``);
- no provider, or no delivery or answer in time: UNAVAILABLE.

A provider of the project's API always answers. A KUKSA provider that never
answered (KUKSA's own providers do not) is taken at delivery, as the KUKSA
databroker does; once it answers, it is waited for. The last target asked for
each actuator is kept (KUKSA v1 ``VIEW_TARGET_VALUE``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.permissions import require
from vehicle_middleware.server.errors import (
    ActuationUnavailableError,
    AlreadyProvidedError,
    InvalidRequestError,
)
from vehicle_middleware.server.signals import Signals
from vehicle_middleware.vstore import InvalidValueError, UnknownKeyError, ValueTooLargeError, VStore

__all__ = ["OUTBOX_BOUND", "Actuation", "ActuatorProvider", "Forward", "Target"]

log = logging.getLogger(__name__)

OUTBOX_BOUND: Final = 1000
"""Messages waiting for one provider to read them; beyond, a request waits (and times out)."""

M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class Target:
    """One actuation asked for, checked: the key, its id and the value's stored bytes."""

    name: str
    key_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Forward:
    """What one provider is asked: its targets of one request, under an id it answers with."""

    request_id: int
    targets: tuple[Target, ...]


_Answer = asyncio.Future[str | None]
"""A provider's answer to one target: None (done) or why it refused."""


@dataclass(eq=False)
class ActuatorProvider(Generic[M]):
    """One provider's open stream (any API): its outgoing messages and what it owes.

    ``outbox`` carries the stream's wire messages (the servicer may put its own
    replies there too); ``encode`` turns a :class:`Forward` into one.
    """

    app: str
    encode: Callable[[Forward], M]
    answers: bool = False
    """Whether its answers are waited for (always for the project's API; for
    KUKSA from its first answer on)."""
    outbox: asyncio.Queue[M] = field(default_factory=lambda: asyncio.Queue(maxsize=OUTBOX_BOUND))
    waiting_by_key: dict[int, deque[_Answer]] = field(default_factory=lambda: defaultdict(deque))
    """Answers owed, by key id, oldest first (KUKSA answers per signal)."""
    waiting_by_request: dict[int, list[_Answer]] = field(default_factory=dict)
    """Answers owed, by request id (the project's API answers per request)."""


class Actuation:
    """The actuators' providers, and the forwarding of requests to them."""

    def __init__(
        self, store: VStore, signals: Signals, claims: WriteClaims, timeout_s: float
    ) -> None:
        self._store = store
        self._signals = signals
        self._claims = claims
        self._timeout = timeout_s
        self._providers: dict[str, ActuatorProvider[object]] = {}
        self._ids = itertools.count(1)
        self.targets: dict[str, tuple[bytes, int]] = {}
        """Key name -> (stored bytes, time) of the last target asked for."""

    @property
    def timeout_s(self) -> float:
        """How long a request may take: delivery and answer (``actuation_timeout_s``)."""
        return self._timeout

    def provider_of(self, name: str) -> str | None:
        """The app providing actuator ``name``, or None. O(1)."""
        stream = self._providers.get(name)
        return stream.app if stream is not None else None

    def claim(
        self,
        who: Caller,
        stream: ActuatorProvider[M],
        names: Sequence[str],
        *,
        field: str = "actuator_identifiers",
    ) -> list[int]:
        """Make ``stream`` the provider of actuators ``names``; all or nothing; their ids.

        Idempotent for actuators ``stream`` already provides.

        Raises:
            PermissionDeniedError: no ``provide`` scope on one.
            UnknownKeyError: one is not a key.
            InvalidRequestError: a catalog says one is not an actuator.
            AlreadyProvidedError: another stream provides one.
        """
        ids = []
        for i, name in enumerate(names):
            where = f"{field}[{i}]"
            self._claims.check_write(who, name, field=where)
            ids.append(self._actuator(name, where))
            owner = self._providers.get(name)
            if owner is not None and owner is not stream:
                raise AlreadyProvidedError(name, owner.app)
        for name in names:
            self._providers[name] = stream  # type: ignore[assignment]
        log.info("app %s provides %d actuators", stream.app, len(names))
        return ids

    async def serve(
        self,
        stream: ActuatorProvider[M],
        reader: asyncio.Task[None],
        write: Callable[[M], Awaitable[None]],
    ) -> None:
        """Write what is sent to a provider's stream while ``reader`` reads its messages;
        release its claims when either ends.

        A provider may half-close its side and go on receiving actuation requests
        (the KUKSA client does; it can no longer answer them, so they time out):
        only the reader's error, or the call's end, ends the stream.
        """
        get: asyncio.Future[M] | None = None
        try:
            while True:
                if reader.done() and not reader.cancelled() and reader.exception() is not None:
                    reader.result()  # its error ends the stream (it may have come mid-write)
                get = asyncio.ensure_future(stream.outbox.get())
                waiting: set[asyncio.Future[Any]] = {get}
                if not reader.done():
                    waiting.add(reader)
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if get in done:
                    message, get = get.result(), None
                    await write(message)
                    continue
                # The reader ended first: this wait goes, or it would take the next
                # message from the queue for no one.
                get.cancel()
                get = None
                reader.result()
        finally:
            # However the stream ends (the reader's error, the call's end), the wait for
            # its next message ends with it: a task left pending is an error when collected.
            if get is not None:
                get.cancel()
            reader.cancel()
            self.release(stream)

    def release(self, stream: ActuatorProvider[M]) -> None:
        """The stream ended: its claims end; whoever waits for it is told (UNAVAILABLE)."""
        for name in [n for n, s in self._providers.items() if s is stream]:
            del self._providers[name]
        reason = f"provider {stream.app!r} went away"
        # Every answer owed is filed by key too (and by request): told once, by key.
        for key_id, by_key in stream.waiting_by_key.items():
            gone = ActuationUnavailableError(self._store.name_of(key_id) or "?", reason)
            for answer in by_key:
                if not answer.done():
                    answer.set_exception(gone)

    def _actuator(self, name: str, field_name: str) -> int:
        key_id = self._store.id_of(name)
        if key_id is None:
            raise UnknownKeyError(name)
        signal = self._signals.get(name)
        if signal is not None and signal.type != "actuator":
            raise InvalidRequestError(field_name, f"{name!r} is a {signal.type}, not an actuator")
        return key_id

    def admit(self, who: Caller, name: str, field_name: str) -> int:
        """The id of actuator ``name`` if ``who`` may actuate it (checked by name first).

        Raises:
            PermissionDeniedError, UnknownKeyError, InvalidRequestError (not an actuator).
        """
        require(who, "actuate", name, field=field_name)
        return self._actuator(name, field_name)

    def target(self, name: str, key_id: int, data: bytes) -> Target:
        """A request of ``data`` for an admitted actuator, checked as a write would be.

        Raises:
            ValueTooLargeError, InvalidValueError: the value size limit, the key's rule.
        """
        if len(data) > self._store.max_value_size:
            raise ValueTooLargeError(name, len(data), self._store.max_value_size)
        check = self._store.value_check(name)
        problem = check(data) if check is not None else None
        if problem is not None:
            raise InvalidValueError(name, problem)
        return Target(name, key_id, data)

    def check(self, who: Caller, name: str, data: bytes, field_name: str) -> Target:
        """One request of stored bytes (the project's API), checked; nothing is sent.

        Raises:
            PermissionDeniedError, UnknownKeyError, InvalidRequestError,
            ValueTooLargeError, InvalidValueError.
        """
        return self.target(name, self.admit(who, name, field_name), data)

    async def actuate(self, targets: Sequence[Target]) -> None:
        """Forward checked requests to their providers; return when they took (or did) them.

        Raises:
            ActuationUnavailableError: no provider, or no delivery or answer in time,
                or the provider went away.
            InvalidValueError: a provider refused (its reason).
        """
        by_stream: dict[int, tuple[ActuatorProvider[object], list[Target]]] = {}
        for t in targets:
            stream = self._providers.get(t.name)
            if stream is None:
                raise ActuationUnavailableError(t.name, "no provider provides this actuator")
            by_stream.setdefault(id(stream), (stream, []))[1].append(t)
        now = time.time_ns()
        for t in targets:
            self.targets[t.name] = (t.data, now)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        waits: list[tuple[Target, _Answer]] = []
        sent: list[tuple[ActuatorProvider[object], int]] = []
        try:
            for stream, mine in by_stream.values():
                forward = Forward(next(self._ids), tuple(mine))
                if stream.answers:
                    answers = [loop.create_future() for _ in mine]
                    stream.waiting_by_request[forward.request_id] = answers
                    sent.append((stream, forward.request_id))
                    for t, answer in zip(mine, answers, strict=True):
                        stream.waiting_by_key[t.key_id].append(answer)
                        waits.append((t, answer))
                try:
                    await asyncio.wait_for(
                        stream.outbox.put(stream.encode(forward)),
                        max(0.0, deadline - loop.time()),
                    )
                except TimeoutError:
                    raise ActuationUnavailableError(
                        mine[0].name, f"provider {stream.app!r} did not take it in time"
                    ) from None
            for t, answer in waits:
                try:
                    refused = await asyncio.wait_for(answer, max(0.0, deadline - loop.time()))
                except TimeoutError:
                    raise ActuationUnavailableError(
                        t.name, f"its provider did not answer within {self._timeout:g} s"
                    ) from None
                if refused is not None:
                    raise InvalidValueError(t.name, f"the provider refused it: {refused}")
        finally:
            for stream, request_id in sent:
                for answer in stream.waiting_by_request.pop(request_id, ()):
                    if answer.done() and not answer.cancelled():
                        answer.exception()  # retrieved: a provider gone after a refusal
                    answer.cancel()
            for stream, mine in by_stream.values():
                for key_id in {t.key_id for t in mine}:
                    _forget_done(stream.waiting_by_key, key_id)

    def answered(self, stream: ActuatorProvider[M], request_id: int, refused: str | None) -> None:
        """The provider answered request ``request_id`` as a whole (the project's API).

        An answer to a request nobody waits for any more (timed out) is ignored.
        """
        stream.answers = True
        for answer in stream.waiting_by_request.get(request_id, ()):
            if not answer.done():
                answer.set_result(refused)

    def answered_key(self, stream: ActuatorProvider[M], key_id: int, refused: str | None) -> None:
        """The provider answered the oldest open request for ``key_id`` (KUKSA's per signal)."""
        stream.answers = True
        waiting = stream.waiting_by_key.get(key_id)
        while waiting:
            answer = waiting.popleft()
            if not answer.done():
                answer.set_result(refused)
                return


def _forget_done(by_key: dict[int, deque[_Answer]], key_id: int) -> None:
    """Drop the answers of ``key_id`` nobody waits for any more (bounded bookkeeping)."""
    waiting = by_key.get(key_id)
    if waiting is None:
        return
    kept = deque(a for a in waiting if not a.done())
    if kept:
        by_key[key_id] = kept
    else:
        del by_key[key_id]
