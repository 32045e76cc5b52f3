"""Every subscriber stream is one session: the own event streams and KUKSA
subscriptions end for the same reasons, with the same statuses and the same
``vmw-reason`` trailer, and the journal records why each ended as one field; a
shutdown ends every open stream at once, without waiting out the grace period."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.contract.values import encode
from vehicle_middleware.contract.wire import (
    APP_ID_HEADER,
    REASON_HEADER,
    REASON_REPLACED,
    REASON_SHUTDOWN,
)
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.config import replace_settings
from vehicle_middleware.server.journal import JournalReport, read_journal
from vehicle_middleware.server.server import start_server

from tests.conftest import eventually, fails
from tests.integration.conftest import TEST_SETTINGS

SPEED = "Vehicle.Speed"


def _reason(error: grpc.aio.AioRpcError) -> str | None:
    return dict(error.trailing_metadata() or ()).get(REASON_HEADER)  # type: ignore[arg-type]


async def _ended(call: object) -> grpc.aio.AioRpcError:
    try:
        while await call.read() is not grpc.aio.EOF:  # type: ignore[attr-defined]
            pass
    except grpc.aio.AioRpcError as e:
        return e
    raise AssertionError("the stream ended without a status")


async def test_each_stream_ends_with_its_reason_as_status_trailer_and_journal_field(
    tmp_path: Path,
) -> None:
    settings = replace_settings(TEST_SETTINGS, journal_dir=str(tmp_path))
    server = await start_server(settings)
    stopped = False
    try:
        provider = ProviderClient(server.address, "sim")
        await provider.add_keys([SPEED])
        await provider.publish({SPEED: encode(12.5)})
        await provider.flush()
        await provider.close()
        async with grpc.aio.insecure_channel(server.address) as channel:
            events = ess_pb2_grpc.EventServiceStub(channel)
            md = ((APP_ID_HEADER, "dash"),)
            first = events.GetEvents(ess_pb2.GetEventsRequest(), metadata=md)
            await first.read()  # the stream's first message: it is open
            second = events.GetEvents(ess_pb2.GetEventsRequest(), metadata=md)
            await second.read()
            replaced = await _ended(first)
            assert replaced.code() is grpc.StatusCode.ABORTED, replaced.details()
            assert "replaced this one" in (replaced.details() or "")
            assert _reason(replaced) == REASON_REPLACED
            second.cancel()  # the app ends its own stream
            await eventually(lambda: "dash" not in server.runtime.streams, what="dash's end")

            sub = v2_grpc.VALStub(channel).Subscribe(
                v2.SubscribeRequest(signal_paths=[SPEED]), metadata=((APP_ID_HEADER, "hmi"),)
            )
            await sub.read()  # the current value: subscribed
            await server.stop(5.0)
            stopped = True
            shutdown = await _ended(sub)
            assert shutdown.code() is grpc.StatusCode.UNAVAILABLE, shutdown.details()
            assert _reason(shutdown) == REASON_SHUTDOWN
    finally:
        if not stopped:
            await server.stop(0)
    records = read_journal([tmp_path], JournalReport())
    ended = [
        (r["app"], r.get("reason"))
        for r in records
        if r["kind"] == Kind.DISCONNECT and r["stream"] == "events"
    ]
    assert ended[:2] == [("dash", "replaced"), ("dash", "closed")]
    assert len(ended) == 3
    assert ended[2][0].startswith("hmi/kuksa-sub-")
    assert ended[2][1] == "shutdown"


async def test_shutdown_ends_open_streams_at_once_with_unavailable() -> None:
    running = await start_server(replace_settings(TEST_SETTINGS, grace_period_s=30.0))
    async with grpc.aio.insecure_channel(running.address) as channel:
        call = ess_pb2_grpc.EventServiceStub(channel).GetEvents(
            ess_pb2.GetEventsRequest(), metadata=(("app-id", "dash"),)
        )
        await call.read()
        t0 = time.monotonic()
        await running.stop(10.0)
        assert time.monotonic() - t0 < 3.0
        await fails(call.read(), grpc.StatusCode.UNAVAILABLE)
    assert running.runtime.ess.apps() == []
