"""A large call lets other callers in while it runs.

A call whose work grows with the store (a wildcard over every key, a listing
scanned past keys its caller may not read) pauses every :data:`BREATHE_EVERY`
items; other calls are served in the pause, so one large call costs them a
pause's worth of waiting, not its whole run.
"""

from __future__ import annotations

import asyncio
from typing import Final

__all__ = ["BREATHE_EVERY", "breathe"]

BREATHE_EVERY: Final = 1_000
"""Items (entries built, keys scanned) between two pauses of a large call."""


async def breathe() -> None:
    """Let other callers be served now (a bare ``sleep(0)`` is one turn of the loop:
    too short for a call arriving from gRPC's poller to be read and answered)."""
    await asyncio.sleep(0.001)
