"""Registering a generated servicer so that some methods write bytes as they are."""

from __future__ import annotations

import grpc
import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2_grpc
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
