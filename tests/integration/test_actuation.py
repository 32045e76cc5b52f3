"""Actuation through the project's SDK, and across the SDK and the KUKSA API.

A real middleware on 127.0.0.1:0 with the KUKSA test catalog: SDK providers
(``ProviderClient.provide_actuators``) answer SDK apps (``AppClient.actuate``)
and KUKSA ``Actuate`` calls; raw KUKSA ``OpenProviderStream`` providers answer
SDK apps; the same checks and refusals on both paths; scopes in token mode.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from vehicle_middleware.contract.values import decode_value, encode
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc
from vehicle_middleware.sdk import (
    ActuationRefusedError,
    ActuationRequest,
    AppClient,
    ProviderClient,
)
from vehicle_middleware.server.auth.tokens import mint
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually, fails
from tests.integration.conftest import AUD, Keys, NewServer
from tests.integration.test_kuksa_api import Provider as KuksaProvider

CATALOG = Path(__file__).with_name("kuksa_catalog.json")
VOLUME = "Vehicle.Cabin.Infotainment.Volume"
SOURCE = "Vehicle.Cabin.Infotainment.Source"
DOOR = "Vehicle.Cabin.Door.Row1.DriverSide.IsOpen"
SPEED = "Vehicle.Speed"
Code = grpc.StatusCode


pytestmark = pytest.mark.settings(vss=(str(CATALOG),))


@pytest.fixture
async def app(server: RunningServer) -> AsyncIterator[AppClient]:
    async with AppClient(server.address, "cockpit", reconnect=False) as client:
        yield client


@pytest.fixture
async def provider(server: RunningServer) -> AsyncIterator[ProviderClient]:
    async with ProviderClient(server.address, "infotainment", reconnect=False) as client:
        yield client


class Recorder:
    """A handler that records each request and answers as told."""

    def __init__(self) -> None:
        self.requests: list[ActuationRequest] = []
        self.refuse: str | None = None
        self.hold: asyncio.Event | None = None

    async def __call__(self, request: ActuationRequest) -> None:
        self.requests.append(request)
        if self.hold is not None:
            await self.hold.wait()
        if self.refuse is not None:
            raise ActuationRefusedError(self.refuse)


async def test_an_sdk_provider_answers_an_sdk_app_single_and_batch_and_may_refuse(
    app: AppClient, provider: ProviderClient
) -> None:
    handler = Recorder()
    stream = await provider.provide_actuators([VOLUME, SOURCE], handler)
    assert set(stream.ids) == {VOLUME, SOURCE}
    await app.actuate(VOLUME, encode(40, datatype="uint8"))
    [first] = handler.requests
    assert decode_value(first.targets[VOLUME]) == 40
    await app.actuate_many(
        {VOLUME: encode(45, datatype="uint8"), SOURCE: encode("USB", datatype="string")}
    )
    batch = handler.requests[1]
    assert {n: decode_value(d) for n, d in batch.targets.items()} == {VOLUME: 45, SOURCE: "USB"}
    handler.refuse = "muted by the driver"
    assert (
        await fails(app.actuate(VOLUME, encode(50, datatype="uint8")), Code.INVALID_ARGUMENT)
        == f"value for '{VOLUME}' refused: the provider refused it: muted by the driver"
    )
    assert stream.handled == 3


async def test_a_kuksa_actuate_is_answered_by_an_sdk_provider(
    server: RunningServer, provider: ProviderClient
) -> None:
    handler = Recorder()
    await provider.provide_actuators([VOLUME], handler)
    async with grpc.aio.insecure_channel(server.address) as channel:
        kuksa = v2_grpc.VALStub(channel)
        signal = t2.SignalID(path=VOLUME)
        await asyncio.wait_for(
            kuksa.Actuate(v2.ActuateRequest(signal_id=signal, value=t2.Value(uint32=30))), 10
        )
        assert decode_value(handler.requests[0].targets[VOLUME]) == 30
        handler.refuse = "door open"
        assert (
            await fails(
                kuksa.Actuate(v2.ActuateRequest(signal_id=signal, value=t2.Value(uint32=31))),
                Code.INVALID_ARGUMENT,
            )
            == f"value for '{VOLUME}' refused: the provider refused it: door open"
        )


async def test_an_sdk_request_is_answered_by_a_kuksa_provider_stream(
    server: RunningServer, app: AppClient
) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        kuksa = KuksaProvider(v2_grpc.VALStub(channel))
        await kuksa.claim(VOLUME)
        volume_id = server.runtime.store.id_of(VOLUME)
        # A KUKSA provider that never answered is taken at delivery, as the databroker does.
        await app.actuate(VOLUME, encode(20, datatype="uint8"))
        message = await asyncio.wait_for(kuksa.call.read(), 5)
        [asked] = message.batch_actuate_stream_request.actuate_requests
        assert (asked.signal_id.id, asked.value.uint32) == (volume_id, 20)  # typed on the wire
        # Once it answers, it is waited for, and its refusal is the SDK app's error.
        await kuksa.requests.put(
            v2.OpenProviderStreamRequest(
                batch_actuate_stream_response=v2.BatchActuateStreamResponse(
                    signal_id=asked.signal_id
                )
            )
        )
        # The stream's messages are taken in order: once this is answered, so was that
        # (a publish is answered only when a signal fails: no key has the id 9999).
        await kuksa.requests.put(
            v2.OpenProviderStreamRequest(
                publish_values_request=v2.PublishValuesRequest(
                    request_id=1, data_points={9999: t2.Datapoint(value=t2.Value(float=1.0))}
                )
            )
        )
        message = await asyncio.wait_for(kuksa.call.read(), 5)
        assert message.publish_values_response.request_id == 1
        refused = asyncio.ensure_future(app.actuate(VOLUME, encode(90, datatype="uint8")))
        message = await asyncio.wait_for(kuksa.call.read(), 5)
        await kuksa.requests.put(
            v2.OpenProviderStreamRequest(
                batch_actuate_stream_response=v2.BatchActuateStreamResponse(
                    signal_id=message.batch_actuate_stream_request.actuate_requests[0].signal_id,
                    error=t2.Error(code=t2.ERROR_CODE_INVALID_ARGUMENT, message="too loud"),
                )
            )
        )
        assert (
            await fails(refused, Code.INVALID_ARGUMENT)
            == f"value for '{VOLUME}' refused: the provider refused it: too loud"
        )
        await kuksa.requests.put(None)
        kuksa.call.cancel()


@pytest.mark.settings(actuation_timeout_s=0.3)
async def test_a_provider_that_does_not_answer_in_time_is_unavailable_to_the_caller(
    server: RunningServer,
) -> None:
    async with (
        ProviderClient(server.address, "slow", reconnect=False) as provider,
        AppClient(server.address, "cockpit", reconnect=False) as app,
    ):
        handler = Recorder()
        handler.hold = asyncio.Event()
        await provider.provide_actuators([VOLUME], handler)
        assert (
            await fails(app.actuate(VOLUME, encode(10, datatype="uint8")), Code.UNAVAILABLE)
            == f"cannot actuate '{VOLUME}': its provider did not answer within 0.3 s"
        )
        handler.hold.set()  # its late answer is ignored; the next request is answered
        handler.hold = None
        await app.actuate(VOLUME, encode(11, datatype="uint8"))
        assert len(handler.requests) == 2


async def test_requests_are_checked_before_any_is_sent(
    app: AppClient, provider: ProviderClient
) -> None:
    handler = Recorder()
    await provider.provide_actuators([VOLUME, SOURCE], handler)
    assert (
        await fails(app.actuate(VOLUME, encode(101, datatype="uint8")), Code.INVALID_ARGUMENT)
        == f"targets[0]: value for '{VOLUME}' refused: value 101 is above the max 100 percent"
    )
    assert await fails(
        app.actuate_many(
            {VOLUME: encode(5, datatype="uint8"), SOURCE: encode("TAPE", datatype="string")}
        ),
        Code.INVALID_ARGUMENT,
    ) == (
        f"targets[1]: value for '{SOURCE}' refused: value 'TAPE' is not one of the allowed "
        "values ['RADIO', 'USB', 'BLUETOOTH']"
    )
    assert (
        await fails(app.actuate(SPEED, encode(1.0, datatype="float")), Code.INVALID_ARGUMENT)
        == f"targets[0]: '{SPEED}' is a sensor, not an actuator"
    )
    assert (
        await fails(app.actuate("Vehicle.Nope", b""), Code.NOT_FOUND)
        == "targets[0]: key 'Vehicle.Nope' does not exist"
    )
    assert handler.requests == []  # nothing reached the provider


async def test_no_provider_is_unavailable_and_a_claim_ends_with_its_stream(
    server: RunningServer, app: AppClient, provider: ProviderClient
) -> None:
    assert (
        await fails(app.actuate(DOOR, encode(True)), Code.UNAVAILABLE)
        == f"cannot actuate '{DOOR}': no provider provides this actuator"
    )
    stream = await provider.provide_actuators([DOOR], Recorder())
    await app.actuate(DOOR, encode(True))
    await stream.close()
    # The client's close cancels its call; the middleware ends the claim when it
    # sees the stream end (a request in between is told the provider went away).
    actuation = server.actuation
    assert actuation is not None
    await eventually(lambda: actuation.provider_of(DOOR) is None, what="the claim's end")
    assert (
        await fails(app.actuate(DOOR, encode(False)), Code.UNAVAILABLE)
        == f"cannot actuate '{DOOR}': no provider provides this actuator"
    )


async def test_a_provider_stream_that_ends_leaves_no_error_in_the_log(
    server: RunningServer,
    app: AppClient,
    provider: ProviderClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A provider's stream that ends normally (the SDK's close, a KUKSA provider that
    half-closes its side, is still sent requests, then goes) logs no ERROR: nothing
    the stream started is left pending when it ends."""
    caplog.set_level(logging.INFO)
    actuation = server.actuation
    assert actuation is not None
    for _ in range(3):
        stream = await provider.provide_actuators([DOOR], Recorder())
        await app.actuate(DOOR, encode(True))
        await stream.close()
        await eventually(lambda: actuation.provider_of(DOOR) is None, what="the claim's end")
    async with grpc.aio.insecure_channel(server.address) as channel:
        claim = v2.OpenProviderStreamRequest(
            provide_actuation_request=v2.ProvideActuationRequest(
                actuator_identifiers=[t2.SignalID(path=DOOR)]
            )
        )
        claimed = asyncio.Event()

        async def claim_then_half_close() -> AsyncIterator[v2.OpenProviderStreamRequest]:
            yield claim
            await claimed.wait()  # the stream's end of requests, once the claim is answered

        kuksa = v2_grpc.VALStub(channel).OpenProviderStream(
            claim_then_half_close(), metadata=(("app-id", "door-ecu"),)
        )
        assert (await kuksa.read()).HasField("provide_actuation_response")
        claimed.set()
        # It half-closed its side (the request iterator ended), and once the middleware
        # has read to that end, it still gets requests.
        await eventually(
            lambda: (
                not any(
                    t.get_coro().__qualname__.endswith("._provider_requests")  # type: ignore[union-attr]
                    for t in asyncio.all_tasks()
                )
            ),
            what="the middleware's reader of the provider's stream at its end",
        )
        await app.actuate(DOOR, encode(True))
        request = await asyncio.wait_for(kuksa.read(), 10)
        assert request.HasField("batch_actuate_stream_request")
        kuksa.cancel()
        await eventually(lambda: actuation.provider_of(DOOR) is None, what="the claim's end")
    gc.collect()  # a task left pending is reported when it is collected
    await asyncio.sleep(0)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


async def test_a_request_whose_provider_goes_away_is_unavailable_naming_its_actuator(
    app: AppClient, provider: ProviderClient
) -> None:
    handler = Recorder()
    handler.hold = asyncio.Event()  # the provider takes the request and never answers
    stream = await provider.provide_actuators([DOOR], handler)
    waiting = asyncio.ensure_future(fails(app.actuate(DOOR, encode(True)), Code.UNAVAILABLE))
    await eventually(lambda: len(handler.requests) == 1, what="the request at the provider")
    await stream.close()
    assert await waiting == f"cannot actuate '{DOOR}': provider 'infotainment' went away"


async def test_another_providers_actuator_is_already_exists_across_both_apis(
    server: RunningServer, provider: ProviderClient
) -> None:
    await provider.provide_actuators([VOLUME], Recorder())
    async with (
        ProviderClient(server.address, "rival", reconnect=False) as rival,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        assert (
            await fails(rival.provide_actuators([SOURCE, VOLUME], Recorder()), Code.ALREADY_EXISTS)
            == f"actuator '{VOLUME}' is already provided by 'infotainment'"
        )
        await rival.provide_actuators([SOURCE], Recorder())  # all or nothing: SOURCE was free
        kuksa = KuksaProvider(v2_grpc.VALStub(channel))
        await kuksa.requests.put(
            v2.OpenProviderStreamRequest(
                provide_actuation_request=v2.ProvideActuationRequest(
                    actuator_identifiers=[t2.SignalID(path=VOLUME)]
                )
            )
        )
        assert (
            await fails(kuksa.call.read(), Code.ALREADY_EXISTS)
            == f"actuator '{VOLUME}' is already provided by 'infotainment'"
        )
        kuksa = KuksaProvider(v2_grpc.VALStub(channel))
        await kuksa.claim(DOOR)
        assert (
            await fails(rival.provide_actuators([DOOR], Recorder()), Code.ALREADY_EXISTS)
            == f"actuator '{DOOR}' is already provided by 'kuksa-client'"
        )
        await kuksa.requests.put(None)
        kuksa.call.cancel()


async def test_scopes_decide_who_may_actuate_and_who_may_provide(
    secure: RunningServer, keys: Keys
) -> None:
    def token(sub: str, scope: str) -> str:
        return mint(keys.private, subject=sub, scope=scope, ttl_s=600, audience=AUD)

    address = secure.address
    clients: list[Callable[[], Awaitable[None]]] = []
    try:
        reader = AppClient(address, "reader", token=token("reader", "read:**"), reconnect=False)
        driver = AppClient(
            address, "driver", token=token("driver", "actuate:Vehicle.Cabin.**"), reconnect=False
        )
        guest = ProviderClient(address, "guest", token=token("guest", "read:**"), reconnect=False)
        owner = ProviderClient(
            address, "owner", token=token("owner", "provide:Vehicle.Cabin.**"), reconnect=False
        )
        clients += [reader.close, driver.close, guest.close, owner.close]
        assert await fails(
            guest.provide_actuators([VOLUME], Recorder()), Code.PERMISSION_DENIED
        ) == (
            f"claim.names[0]: app 'guest' may not write key '{VOLUME}' "
            "(no provide: scope matches it)"
        )
        handler = Recorder()
        await owner.provide_actuators([VOLUME], handler)
        assert await fails(
            reader.actuate(VOLUME, encode(10, datatype="uint8")), Code.PERMISSION_DENIED
        ) == (
            f"targets[0]: app 'reader' may not actuate key '{VOLUME}' "
            "(no actuate: scope matches it)"
        )
        await driver.actuate(VOLUME, encode(10, datatype="uint8"))
        await eventually(lambda: len(handler.requests) == 1, what="the request handled")
    finally:
        for close in clients:
            await close()


async def test_after_a_middleware_restart_the_sdk_provider_claims_its_actuators_again(
    new_server: NewServer,
) -> None:
    first = await new_server()
    async with (
        ProviderClient(first.address, "infotainment") as provider,
        AppClient(first.address, "cockpit") as app,
    ):
        handler = Recorder()
        stream = await provider.provide_actuators([VOLUME], handler)
        await first.stop(0)
        await new_server(listen=f"127.0.0.1:{first.port}")
        await eventually(lambda: stream.reconnects == 1, timeout=10, what="the claim again")
        await app.actuate(VOLUME, encode(25, datatype="uint8"))
        assert decode_value(handler.requests[-1].targets[VOLUME]) == 25
