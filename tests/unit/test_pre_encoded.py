"""Registering a generated servicer so that some methods write bytes as they are."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from vehicle_middleware.ess import DataUpdated, KeyAdded
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.server.codecs import BatchEncoder
from vehicle_middleware.server.rpc.batches import EventBytes
from vehicle_middleware.server.rpc.batches_reference import EventMessages
from vehicle_middleware.server.rpc.convert import event_batch
from vehicle_middleware.server.rpc.pre_encoded import PreEncodedServer


async def test_a_method_the_service_lacks_is_refused_by_name() -> None:
    server = grpc.aio.server()
    try:
        with pytest.raises(ValueError, match=r"EventService has no method \['Event'\]"):
            ess_pb2_grpc.add_EventServiceServicer_to_server(
                ess_pb2_grpc.EventServiceServicer(), PreEncodedServer(server, frozenset({"Event"}))
            )
    finally:
        await server.stop(None)


class _Batches(ess_pb2_grpc.EventServiceServicer):
    """``GetEvents`` answered with the messages ``encoder`` writes, as bytes."""

    def __init__(self, encoder: BatchEncoder, events: list[Any], max_bytes: int) -> None:
        self._messages = encoder.messages(events, max_bytes)

    async def GetEvents(
        self, request: ess_pb2.GetEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        for message in self._messages:
            yield message


@pytest.mark.parametrize(
    "encoder_type",
    [pytest.param(EventBytes, id="fast"), pytest.param(EventMessages, id="reference")],
)
async def test_a_clients_stub_reads_the_bytes_either_encoder_wrote(
    encoder_type: Callable[[], BatchEncoder],
) -> None:
    """The method's handler passes each implementation's bytes on as they are: a
    client's generated stub parses them to the batches protobuf builds."""
    events: list[Any] = [KeyAdded(3, "Vehicle.Speed")]
    events += [DataUpdated(3, seq, 1_764_000_000_000_000_000, b"v" * 40, 0) for seq in (1, 2, 3)]
    server = grpc.aio.server()
    ess_pb2_grpc.add_EventServiceServicer_to_server(
        _Batches(encoder_type(), events, 120), PreEncodedServer(server, frozenset({"GetEvents"}))
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = ess_pb2_grpc.EventServiceStub(channel).GetEvents(ess_pb2.GetEventsRequest())
            got = [batch async for batch in call]
    finally:
        await server.stop(None)
    assert len(got) > 1  # cut to the message limit
    assert [e for batch in got for e in batch.events] == list(event_batch(events).events)
