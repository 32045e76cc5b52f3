"""Who is calling: the ``app-id`` metadata of every call."""

from __future__ import annotations

import re
from typing import Any, Final

import grpc

from middleware.errors import UnauthenticatedError

__all__ = ["APP_ID_HEADER", "app_id"]

APP_ID_HEADER: Final = "app-id"
_APP_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)


def app_id(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """The caller's app id.

    Raises:
        UnauthenticatedError: the header is missing, repeated or malformed.
    """
    found = [v for k, v in (context.invocation_metadata() or ()) if k == APP_ID_HEADER]
    if not found:
        raise UnauthenticatedError(
            f"missing '{APP_ID_HEADER}' metadata: every call must say which app it is"
        )
    if len(found) > 1:
        raise UnauthenticatedError(f"'{APP_ID_HEADER}' metadata given {len(found)} times")
    value = found[0]
    if not isinstance(value, str) or _APP_ID.fullmatch(value) is None:
        raise UnauthenticatedError(
            f"malformed '{APP_ID_HEADER}' metadata: 1 to 64 characters of [A-Za-z0-9_.-]"
        )
    return value
