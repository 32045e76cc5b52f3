"""Shared test helpers: wait for a condition, and expect a gRPC call to fail; and
which tests share a worker when pytest-xdist runs them (``make unit``).

Every wait in the tests goes through :func:`eventually` (async),
:func:`eventually_async` (an async probe) or :func:`wait_until` (threads); a
deadline loop written inline is a helper that was not found.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import grpc
import pytest
from hypothesis import settings

# Hypothesis checks properties, not speed: its default 200 ms limit an example
# would fail a test whose example ran long because the machine was busy.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

SHARED_SETUP: Final = (
    "tests/integration/test_cluster.py",  # three nodes, started once for the module
    "tests/integration/test_fuzz.py",  # one server for every fuzz case
    "tests/integration/test_kuksa_client.py",  # .venv-kuksa, never made by two at once
    "tests/integration/test_sdk_install.py",  # the SDK built and installed once
    "tests/integration/test_server_install.py",  # the server built and installed once
    "tests/spark/test_cluster.py",  # a standalone Spark cluster, started once
    "tests/spark/test_landing.py",  # a fleet's journals exported once
    "tests/unit/test_docs.py",  # every documented command's --help, run once
)
"""Tests (by the start of their node id) that share a costly module-scoped setup:
under pytest-xdist one worker runs all those of a prefix, so the setup is made once;
every other test goes to whichever worker is free. (The Spark tests are not one
group, although each worker that runs one starts its own SparkSession: as one group,
one worker would run them all one after another while the others wait.)"""

if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """With ``-n`` and the default ``--dist load``: :data:`SHARED_SETUP`'s groups.
        (xdist's own ``xdist_group`` marks would say the same, but ``--dist loadgroup``
        does not see them under pytest 9.)"""
        if config.getoption("dist") != "load":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class SharedSetupScheduling(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return next((p for p in SHARED_SETUP if nodeid.startswith(p)), nodeid)

        return SharedSetupScheduling(config, log)


async def eventually(
    condition: Callable[[], bool],
    *,
    timeout: float = 5.0,
    what: str | Callable[[], str] = "condition",
    poll: float = 0.005,
) -> None:
    """Wait until ``condition()`` holds, polling every ``poll`` seconds, or fail after
    ``timeout`` seconds, saying ``what`` was awaited (a callable: called at the failure,
    to say what was seen).

    For state that changes on the server's side with no event to await (e.g.
    an app removed after its stream was cancelled).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {said}")
        await asyncio.sleep(poll)


async def eventually_async(
    probe: Callable[[], Awaitable[object]],
    expected: object = True,
    timeout: float = 10.0,
    *,
    what: str | Callable[[object], str] | None = None,
    poll: float = 0.05,
) -> object:
    """Wait until ``await probe()`` equals ``expected`` (e.g. a status read over
    gRPC from another process), polling, or fail after ``timeout`` seconds saying
    ``what`` (a callable: given the last answer). Returns the last answer."""
    deadline = time.monotonic() + timeout
    while (got := await probe()) != expected:
        if time.monotonic() > deadline:
            said = what(got) if callable(what) else what
            raise AssertionError(said or f"got {got!r}, waited for {expected!r}")
        await asyncio.sleep(poll)
    return got


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float = 5.0,
    what: str | Callable[[], str] = "condition",
    poll: float = 0.002,
) -> None:
    """The synchronous twin of :func:`eventually`, for threads (e.g. the journal writer)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {said}")
        time.sleep(poll)


async def fails(
    call: Awaitable[object], code: grpc.StatusCode, *fragments: str, timeout: float = 30.0
) -> str:
    """Await ``call`` (within ``timeout`` seconds): it must fail with ``code``, its
    details naming each of ``fragments``. Returns the details, for further checks
    (``assert await fails(call, code) == "the whole message"``)."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await asyncio.wait_for(call, timeout)
    details = err.value.details() or ""
    assert err.value.code() == code, details
    for fragment in fragments:
        assert fragment in details, details
    return details
