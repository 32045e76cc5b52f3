"""The SDK leaves nothing to miss: failures say what happened, where, and what to
do (a client against no middleware, a provider whose write another provider's claim
refused), and a subscription made before its key exists is not silently lost."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest
from vehicle_middleware.contract.values import encode
from vehicle_middleware.sdk import (
    AppClient,
    DataEvent,
    KeyAddedEvent,
    MiddlewareUnreachableError,
    ProviderClient,
    PublishRefusedError,
    Sub,
)
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually

SPEED = "Vehicle.Speed"


def _nobody() -> str:
    """An address on loopback where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def test_an_app_with_no_middleware_is_told_where_it_looked() -> None:
    target = _nobody()
    app = AppClient(target, "lonely")
    try:
        with pytest.raises(MiddlewareUnreachableError) as err:
            await asyncio.wait_for(app.connect(timeout=1.0), 30)
    finally:
        await app.close()
    assert target in str(err.value)
    assert "is it running there" in str(err.value)
    assert isinstance(err.value, TimeoutError)  # what callers caught before


async def test_a_provider_with_no_middleware_is_told_instead_of_waiting_forever() -> None:
    target = _nobody()
    provider = ProviderClient(target, "lonely", connect_timeout=1.0)
    with pytest.raises(MiddlewareUnreachableError) as err:
        await asyncio.wait_for(provider.add_keys([SPEED]), 30)
    assert target in str(err.value)
    await provider.close()


async def test_a_write_refused_for_another_providers_claim_says_whose(
    server: RunningServer,
) -> None:
    owner = ProviderClient(server.address, "owner")
    intruder = ProviderClient(server.address, "intruder")
    try:
        await owner.add_keys([SPEED], claim=True)
        await intruder.add_keys([SPEED])
        await intruder.publish({SPEED: encode(1.0)})  # refused on the middleware's side
        with pytest.raises(PublishRefusedError) as err:
            await intruder.flush()
        assert err.value.code is grpc.StatusCode.PERMISSION_DENIED
        assert "owner" in err.value.details, err.value.details
        assert "found when flushing" in str(err.value)
    finally:
        await intruder.close()
        await owner.close()


async def test_an_app_subscribed_before_its_key_exists_gets_its_data_once_added(
    server: RunningServer,
) -> None:
    """The subscription's result says NOT_FOUND; the SDK registers it when the key
    is added, so the app gets the data (it got nothing, silently, before)."""
    async with AppClient(server.address, "early") as app:
        [result] = await app.subscribe([Sub(SPEED)])
        assert result.status == "NOT_FOUND"
        async with ProviderClient(server.address, "late-provider") as provider:
            await provider.add_keys([SPEED])
            events = app.events()
            added = await asyncio.wait_for(anext(events), 30)
            assert isinstance(added, KeyAddedEvent)
            assert added.name == SPEED
            await eventually(
                lambda: [s.key for s in server.runtime.ess.subscriptions("early")] == [SPEED],
                timeout=30,
                what="the subscription registered",
            )
            await provider.publish({SPEED: encode(42.0)})
            await provider.flush()
            data = await asyncio.wait_for(anext(events), 30)
            assert isinstance(data, DataEvent)
            assert (data.name, data.seq) == (SPEED, 1)
