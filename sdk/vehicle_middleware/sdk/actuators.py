"""Actuation in the SDK: a provider's actuators answered by a handler; requests from apps.

A provider claims actuators with :meth:`ProviderClient.provide_actuators
<vehicle_middleware.sdk.ProviderClient.provide_actuators>` and a handler; each
request (from an app of this SDK, or a KUKSA client's ``Actuate``) calls the
handler with the targets of that request, in order, one request at a time.
The handler returns when it has done them (the caller's call succeeds) or
raises :class:`ActuationRefusedError` (the caller gets INVALID_ARGUMENT with
its reason); any other exception refuses too, and is logged. The caller waits
at most the middleware's ``actuation_timeout_s`` (5 s) for the answer.

The claim holds while the stream is open. When the middleware goes away the
stream reconnects with backoff and claims the actuators again; a claim
refused then (another provider took them meanwhile) ends it, logged and in
:attr:`ActuatorStream.error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc
from vehicle_middleware.contract.channel import RETRYABLE, Backoff
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2 as pb
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2_grpc as pb_grpc
from vehicle_middleware.sdk import write_races

__all__ = [
    "ActuationHandler",
    "ActuationRefusedError",
    "ActuationRequest",
    "ActuatorStream",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ActuationRequest:
    """One request to a provider: what to set each of its actuators to."""

    request_id: int
    targets: dict[str, bytes]
    """Actuator name -> value wanted (``vehicle.value.v1`` bytes for a typed
    key: :func:`vehicle_middleware.contract.values.decode_value`)."""


class ActuationRefusedError(Exception):
    """Raised by a handler: the actuation is not done; ``reason`` is the caller's error."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


ActuationHandler = Callable[[ActuationRequest], Awaitable[None] | None]

_Call = grpc.aio.StreamStreamCall[pb.ProviderMessage, pb.ProviderInstruction]


class ActuatorStream:
    """One ``ProvideActuators`` stream: the claim, and the handler answering its requests."""

    def __init__(
        self,
        stub: pb_grpc.ActuationStub,
        md: tuple[tuple[str, str], ...],
        names: Sequence[str],
        handler: ActuationHandler,
        *,
        reconnect: bool,
        app_id: str,
    ) -> None:
        self.names = list(names)
        self.ids: dict[str, int] = {}
        """Name -> key id of each actuator claimed (refreshed after a reconnect)."""
        self.handled = 0
        """Requests answered (done or refused)."""
        self.reconnects = 0
        self.error: tuple[grpc.StatusCode, str] | None = None
        """Why the stream ended for good (a refused claim: code and details), or None."""
        self._stub = stub
        self._md = md
        self._handler = handler
        self._reconnect = reconnect
        self._app = app_id
        self._call: _Call | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the stream and claim; return once the middleware confirmed the claim.

        Raises:
            grpc.aio.AioRpcError: the claim was refused (ALREADY_EXISTS,
                PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT) or the
                middleware cannot be reached.
        """
        await self._claim()
        self._task = asyncio.create_task(self._serve(), name=f"actuators-{self._app}")

    async def close(self) -> None:
        """End the stream: the claims end with it. Idempotent."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._call is not None:
            self._call.cancel()
            self._call = None

    async def _claim(self) -> None:
        for attempt in range(1, write_races.ATTEMPTS + 1):
            call: _Call = self._stub.ProvideActuators(metadata=self._md, wait_for_ready=True)
            self._call = call
            try:
                await call.write(pb.ProviderMessage(claim=pb.Claim(names=self.names)))
                message = await call.read()
            except grpc.aio.AioRpcError as e:
                if write_races.write_raced_end(e) and attempt < write_races.ATTEMPTS:
                    continue  # the middleware's answer was lost to grpc's INTERNAL: ask again
                raise
            break
        if not isinstance(message, pb.ProviderInstruction) or not message.HasField("claimed"):
            raise RuntimeError("the middleware ended the actuator stream without confirming")
        self.ids = {a.name: a.id for a in message.claimed.actuators}

    async def _serve(self) -> None:
        backoff = Backoff()
        while True:
            call = self._call
            assert call is not None
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                while isinstance(message := await call.read(), pb.ProviderInstruction):
                    if message.HasField("request"):
                        await call.write(await self._answer(message.request))
                        backoff.reset()
            code = await call.code()
            if code is not grpc.StatusCode.OK and code not in RETRYABLE:
                self._ended(code, await call.details())
                return
            if not self._reconnect:
                return
            log.info("provider %s: actuator stream ended (%s); reconnecting", self._app, code.name)
            while True:
                await asyncio.sleep(backoff.delay())
                try:
                    await self._claim()
                except grpc.aio.AioRpcError as e:
                    if e.code() in RETRYABLE:
                        continue
                    self._ended(e.code(), e.details())
                    return
                self.reconnects += 1
                log.info("provider %s: %d actuators claimed again", self._app, len(self.ids))
                break

    def _ended(self, code: grpc.StatusCode, details: str | None) -> None:
        self.error = (code, details or "")
        log.error(
            "provider %s: the middleware ended its actuator stream (%s: %s)",
            self._app,
            code.name,
            details,
        )

    async def _answer(self, request: pb.ActuationRequest) -> pb.ProviderMessage:
        asked = ActuationRequest(request.request_id, {t.name: t.data for t in request.targets})
        answer = pb.Answer(request_id=request.request_id)
        try:
            result = self._handler(asked)
            if inspect.isawaitable(result):
                await result
        except ActuationRefusedError as e:
            answer.refused = e.reason
        except Exception as e:
            log.exception("provider %s: actuation handler failed", self._app)
            answer.refused = f"{type(e).__name__}: {e}"
        self.handled += 1
        return pb.ProviderMessage(answer=answer)
