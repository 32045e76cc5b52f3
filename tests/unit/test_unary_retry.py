"""The SDK's retry of a unary call the middleware could not admit
(:func:`vehicle_middleware.contract.channel.retry_unary`): which errors are retried, for
which calls, how often, and with what waits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc
import pytest
from vehicle_middleware.contract.channel import (
    UNARY_ATTEMPTS,
    Backoff,
    refused_unprocessed,
    retry_unary,
)

Code = grpc.StatusCode
REFUSED = "Stream removed (RST_STREAM (Received RST_STREAM with error code 7))"
"""What gRPC says of a call the middleware's transport refused beyond its
``max_concurrent_streams`` (measured)."""


def error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class Calls:
    """A unary call that fails with the errors given, then answers ``ok``."""

    def __init__(self, *errors: grpc.aio.AioRpcError) -> None:
        self.errors = list(errors)
        self.tries = 0

    def __call__(self) -> Awaitable[str]:
        self.tries += 1

        async def answer() -> str:
            if self.errors:
                raise self.errors.pop(0)
            return "ok"

        return answer()


class Waits(Backoff):
    """The backoff's delays as the retry asks for them (tiny, so the test does not wait)."""

    def __init__(self) -> None:
        super().__init__(first=0.001, cap=0.004)
        self.asked: list[float] = []

    def delay(self) -> float:
        d = super().delay()
        self.asked.append(d)
        return d


async def run(call: Callable[[], Awaitable[str]], *, idempotent: bool, waits: Waits) -> str:
    return await asyncio.wait_for(
        retry_unary(call, idempotent=idempotent, backoff=waits), timeout=5
    )


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_call_refused_before_it_ran_is_retried_with_growing_jittered_waits(
    idempotent: bool,
) -> None:
    calls = Calls(*[error(Code.UNAVAILABLE, REFUSED)] * 3)
    waits = Waits()
    assert await run(calls, idempotent=idempotent, waits=waits) == "ok"
    assert calls.tries == 4
    # Each wait is its step (0.001, 0.002, 0.004) less a random part of up to half.
    for wait, step in zip(waits.asked, (0.001, 0.002, 0.004), strict=True):
        assert step / 2 <= wait <= step


@pytest.mark.parametrize(
    "gone",
    [
        error(Code.UNAVAILABLE, "cannot actuate 'Vehicle.X': provider 'p' went away"),
        error(Code.CANCELLED, "CANCELLED"),
    ],
)
async def test_an_unavailable_or_shed_call_is_retried_only_if_idempotent(
    gone: grpc.aio.AioRpcError,
) -> None:
    read = Calls(gone)
    assert await run(read, idempotent=True, waits=Waits()) == "ok"
    write = Calls(gone)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await run(write, idempotent=False, waits=Waits())
    assert raised.value is gone
    assert write.tries == 1


@pytest.mark.parametrize(
    "code", [Code.RESOURCE_EXHAUSTED, Code.INVALID_ARGUMENT, Code.INTERNAL, Code.ABORTED]
)
async def test_other_statuses_are_not_retried(code: grpc.StatusCode) -> None:
    calls = Calls(error(code, "no"))
    with pytest.raises(grpc.aio.AioRpcError):
        await run(calls, idempotent=True, waits=Waits())
    assert calls.tries == 1


async def test_the_tries_are_bounded_and_the_last_error_is_raised() -> None:
    errors = [error(Code.UNAVAILABLE, f"{REFUSED} {i}") for i in range(UNARY_ATTEMPTS + 1)]
    calls = Calls(*errors)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await run(calls, idempotent=True, waits=Waits())
    assert calls.tries == UNARY_ATTEMPTS
    assert raised.value is errors[UNARY_ATTEMPTS - 1]


def test_only_an_unavailable_naming_the_refused_stream_is_refused_unprocessed() -> None:
    assert refused_unprocessed(error(Code.UNAVAILABLE, REFUSED))
    assert not refused_unprocessed(error(Code.UNAVAILABLE, "the middleware is shutting down"))
    assert not refused_unprocessed(error(Code.CANCELLED, REFUSED))
