"""Which event loop the process runs on (``event_loop``: vehicle_middleware.server.loop)."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop  # a dependency of vehicle-middleware-server wherever it installs (not on Windows)
from vehicle_middleware.server.config import load_settings
from vehicle_middleware.server.loop import LoopFactory, loop_factory


def _run_on(factory: LoopFactory) -> type:
    """The type of the loop ``factory`` makes, after a sub-millisecond sleep on it."""

    async def body() -> type:
        await asyncio.sleep(0.0002)  # the behaviour under test: a timer below libuv's 1 ms
        return type(asyncio.get_running_loop())

    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(body())


def test_auto_and_uvloop_run_on_uvloop_where_it_is_installed() -> None:
    for choice in ("auto", "uvloop"):
        name, factory = loop_factory(choice)
        assert name == "uvloop"
        assert _run_on(factory) is uvloop.Loop


def test_asyncio_runs_on_asyncios_own_loop() -> None:
    name, factory = loop_factory("asyncio")
    assert name == "asyncio"
    loop_type = _run_on(factory)
    assert issubclass(loop_type, asyncio.BaseEventLoop)
    assert loop_type is not uvloop.Loop


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an import of a missing module does
    name, factory = loop_factory("auto")
    assert name == "asyncio"
    assert _run_on(factory) is not uvloop.Loop
    with pytest.raises(RuntimeError, match=r"event_loop 'uvloop': uvloop cannot be imported"):
        loop_factory("uvloop")


def test_an_unknown_loop_is_refused_naming_the_setting_and_its_values() -> None:
    with pytest.raises(ValueError, match=r"event_loop must be one of auto, uvloop, asyncio"):
        loop_factory("tokio")
    with pytest.raises(ValueError, match=r"event_loop must be one of auto, uvloop, asyncio"):
        load_settings(overrides={"event_loop": "tokio"})
    assert load_settings().process.event_loop == "auto"
