"""A real middleware server on 127.0.0.1:0 per test, and raw stubs to call it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from vmw.proto.ess.v1 import ess_pb2_grpc
from vmw.proto.vstore.v1 import vstore_pb2_grpc
from vmw.server.config import Settings
from vmw.server.server import RunningServer, start_server

TEST_SETTINGS = Settings(listen="127.0.0.1:0", keepalive_time_s=1.0, keepalive_timeout_s=1.0)


@pytest.fixture
async def server(request: pytest.FixtureRequest) -> AsyncIterator[RunningServer]:
    marker = request.node.get_closest_marker("settings")
    settings = dataclasses.replace(TEST_SETTINGS, **(marker.kwargs if marker else {}))
    running = await start_server(settings)
    try:
        yield running
    finally:
        await running.stop(0)


class Stubs:
    """Raw stubs on one channel, with an app id (or none)."""

    def __init__(self, channel: grpc.aio.Channel, app: str | None) -> None:
        self.channel = channel
        self.md: tuple[tuple[str, str], ...] = (("app-id", app),) if app else ()
        self.events = ess_pb2_grpc.EventServiceStub(channel)
        self.vstore = vstore_pb2_grpc.VStoreStub(channel)


@pytest.fixture
async def connect(server: RunningServer) -> AsyncIterator[Any]:
    channels: list[grpc.aio.Channel] = []

    def make(app: str | None = "test-app") -> Stubs:
        channel = grpc.aio.insecure_channel(server.address)
        channels.append(channel)
        return Stubs(channel, app)

    yield make
    for channel in channels:
        await channel.close()
