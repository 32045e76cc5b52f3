"""A large call lets other callers in while it runs.

A call whose work grows with the store (a wildcard over every key, a listing
scanned past keys its caller may not read) pauses every :data:`PAUSE_EVERY`
items; other calls are served in the pause, so one large call costs them a
pause's worth of waiting, not its whole run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Final

from vehicle_middleware.vstore import VStore

__all__ = ["PAUSE_EVERY", "breathe", "scan_keys"]

PAUSE_EVERY: Final = 1_000
"""Items (entries built, keys scanned) between two pauses of a large call."""


async def breathe() -> None:
    """Let other callers be served now (a bare ``sleep(0)`` is one turn of the loop:
    too short for a call arriving from gRPC's poller to be read and answered)."""
    await asyncio.sleep(0.001)


async def scan_keys(
    store: VStore, prefix: str = "", *, start_after: str = ""
) -> AsyncGenerator[tuple[str, int], None]:
    """``(name, id)`` of the keys in the branch ``prefix`` after ``start_after``, in
    name order (:meth:`VStore.iter_keys`), pausing every :data:`PAUSE_EVERY` keys.

    After a pause the scan goes on after the last key it yielded: keys may have
    come and gone meanwhile, and a key it yielded before may be gone (its id even
    reused). A caller that stops early closes it (``contextlib.aclosing``).
    """
    after, scanned = start_after, 0
    while True:
        for name, key_id in store.iter_keys(prefix, start_after=after):
            yield name, key_id
            scanned += 1
            if scanned % PAUSE_EVERY == 0:
                after = name
                break
        else:
            return
        await breathe()
