"""The wire contract beyond the ``.proto`` files: metadata names, their values, the seq cycle.

Defined once, here, and imported by both sides: the server (``vehicle_middleware.server.auth``,
``vehicle_middleware.server.rpc``) and the SDK. It lives in the SDK package because the SDK may
import nothing of the server, while the server may import the SDK's contract.
The ESS core keeps its own ``MAX_SEQ`` (a pure package imports nothing of
``middleware``); ``tests/unit/test_layout.py`` checks that the two agree.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APP_ID_HEADER",
    "AUTH_HEADER",
    "KEYS_VERSION_HEADER",
    "REASON_HEADER",
    "REASON_REPLACED",
    "REASON_SHUTDOWN",
    "SEQ_CYCLE",
]

APP_ID_HEADER: Final = "app-id"
"""Request metadata: the calling app's identity (open mode; in token mode it must
match the token's subject)."""
AUTH_HEADER: Final = "authorization"
"""Request metadata: ``Bearer <JWT>`` in token mode."""
KEYS_VERSION_HEADER: Final = "keys-version"
"""Request metadata of ``Publish``: the key-id assignment the writer's ids come
from (as ``AddKeys`` returned it); a stale one is refused before any write."""
REASON_HEADER: Final = "vmw-reason"
"""Trailing metadata saying why the middleware ended an event stream."""
REASON_REPLACED: Final = "replaced"
"""A newer stream of the same app took over: do not reconnect."""
REASON_SHUTDOWN: Final = "shutdown"
"""The middleware is shutting down: reconnect later."""
SEQ_CYCLE: Final = 2**32 - 1
"""``seq`` runs 1 .. 2^32-1, then 1 again (0 is never used)."""
