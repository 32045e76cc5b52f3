"""Shared test helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def eventually(
    condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "condition"
) -> None:
    """Wait until ``condition()`` holds, polling, or fail after ``timeout`` seconds.

    For state that changes on the server's side with no event to await (e.g.
    an app removed after its stream was cancelled).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.005)


async def eventually_async(
    probe: Callable[[], Awaitable[object]], expected: object, timeout: float = 10.0
) -> None:
    """Wait until ``await probe()`` equals ``expected`` (e.g. a status read over
    gRPC from another process), polling, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (got := await probe()) != expected:
        assert time.monotonic() < deadline, f"got {got!r}, waited for {expected!r}"
        await asyncio.sleep(0.05)


def wait_until(
    condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "condition"
) -> None:
    """The synchronous twin of :func:`eventually`, for threads (e.g. the journal writer)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.002)
