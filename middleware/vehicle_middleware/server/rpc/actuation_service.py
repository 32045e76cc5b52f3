"""The Actuation servicer: Actuate, ProvideActuators. Thin: the rules are in the core.

The core, :mod:`vehicle_middleware.server.actuation`, is shared with KUKSA's actuation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2 as pb
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2_grpc as pb_grpc
from vehicle_middleware.server.actuation import Actuation, ActuatorProvider, Forward
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.rpc import convert
from vehicle_middleware.server.rpc.identity import caller
from vehicle_middleware.server.rpc.status import check_decoded, maps_errors
from vehicle_middleware.vstore import VStoreError

__all__ = ["ActuationService"]


def _request(forward: Forward) -> pb.ProviderInstruction:
    message = pb.ProviderInstruction()
    request = message.request
    request.request_id = forward.request_id
    for t in forward.targets:
        target = request.targets.add()
        target.name = t.name
        target.id = t.key_id
        target.data = t.data
    return message


class ActuationService(pb_grpc.ActuationServicer):
    def __init__(
        self, authenticator: Authenticator, limits: RequestLimits, actuation: Actuation
    ) -> None:
        self._authenticator = authenticator
        self._actuation = actuation
        self._limit = limits.max_keys_per_request

    @maps_errors(field="targets")
    async def Actuate(
        self, request: pb.ActuateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ActuateResponse:
        who = caller(context, self._authenticator)
        convert.check_count("targets", request.targets, self._limit)
        targets = []
        for i, t in enumerate(request.targets):
            try:
                targets.append(self._actuation.check(who, t.name, t.data, f"targets[{i}]"))
            except VStoreError as e:
                e.index = i
                raise
        await self._actuation.actuate(targets)
        return pb.ActuateResponse()

    @maps_errors()
    async def ProvideActuators(
        self,
        request_iterator: AsyncIterator[pb.ProviderMessage],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        who = caller(context, self._authenticator)
        stream: ActuatorProvider[pb.ProviderInstruction] = ActuatorProvider(
            who.app, _request, answers=True
        )
        reader = asyncio.create_task(self._provider_messages(who, stream, request_iterator))
        await self._actuation.serve(stream, reader, context.write)

    async def _provider_messages(
        self,
        who: Caller,
        stream: ActuatorProvider[pb.ProviderInstruction],
        messages: AsyncIterator[pb.ProviderMessage],
    ) -> None:
        async for message in messages:
            check_decoded(message)
            kind = message.WhichOneof("kind")
            if kind == "claim":
                names = list(message.claim.names)
                convert.check_count("claim.names", names, self._limit)
                ids = self._actuation.claim(who, stream, names, field="claim.names")
                claimed = pb.ProviderInstruction()
                for name, key_id in zip(names, ids, strict=True):
                    claimed.claimed.actuators.add(name=name, id=key_id)
                await stream.outbox.put(claimed)
            elif kind == "answer":
                answer = message.answer
                refused = answer.refused if answer.HasField("refused") else None
                self._actuation.answered(stream, answer.request_id, refused)
