"""Shared test helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


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


def wait_until(
    condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "condition"
) -> None:
    """The synchronous twin of :func:`eventually`, for threads (e.g. the journal writer)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.002)
