"""The process's event loop: uvloop where it is installed, else asyncio's own.

Everything the middleware does runs on one asyncio loop, so the loop's own
cost per callback, timer and socket wake-up is paid for every message. uvloop
(libuv under asyncio's interface) pays less: the server's CPU time an event
is lower with it at every load the end-to-end benchmark runs (figures in
BENCHMARKS.md). gRPC's asyncio stack runs on any asyncio loop.

One difference shows: libuv counts timers in whole milliseconds, so a wait
shorter than one fires at the loop's next turn. The write budget
(:mod:`vehicle_middleware.server.pacing`) still holds on average: its schedule moves on by
one gap a turn whether the turn came early or not, so the waits grow until
they are long enough to be kept.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import Final

__all__ = ["LOOPS", "LoopFactory", "check_choice", "loop_factory"]

LOOPS: Final = ("auto", "uvloop", "asyncio")
"""The ``event_loop`` setting's values: ``auto`` is uvloop where it can be
imported (it is a dependency of the server on Linux and macOS), else asyncio."""

LoopFactory = Callable[[], asyncio.AbstractEventLoop]
"""What ``asyncio.Runner(loop_factory=...)`` takes."""


def check_choice(choice: str) -> None:
    """ValueError naming the setting and its values unless ``choice`` is one of :data:`LOOPS`."""
    if choice not in LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(LOOPS)}, got {choice!r}")


def loop_factory(choice: str) -> tuple[str, LoopFactory]:
    """The loop ``choice`` names (one of :data:`LOOPS`): its name and a factory
    for ``asyncio.Runner(loop_factory=...)``.

    Raises:
        ValueError: ``choice`` is not one of :data:`LOOPS`.
        RuntimeError: ``uvloop`` asked for, and it cannot be imported.
    """
    check_choice(choice)
    if choice != "asyncio":
        try:
            uvloop = importlib.import_module("uvloop")
        except ImportError as e:
            if choice == "uvloop":
                raise RuntimeError(
                    f"event_loop 'uvloop': uvloop cannot be imported ({e}); install it "
                    "(pip install uvloop) or use event_loop 'auto' or 'asyncio'"
                ) from None
        else:
            factory: LoopFactory = uvloop.new_event_loop
            return "uvloop", factory
    return "asyncio", asyncio.new_event_loop
