"""What the command-line clients (sample apps, providers) share: which app id a
token is for, and a one-line reason when the middleware refuses them.

Not part of the SDK: an app that imports :mod:`middleware.client` handles its
errors itself; these are for the ``python -m ...`` entry points only.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Final

import grpc

from middleware.client import PublishRefusedError

__all__ = ["REFUSED_EXIT", "TokenFormatError", "app_id_for", "refusal", "token_subject"]

REFUSED_EXIT: Final = 1
"""Exit status of a client the middleware refused (a bad token, a missing scope...)."""

_FINAL: Final = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Codes that end a client for good: said in one line, not a traceback."""


class TokenFormatError(ValueError):
    """The ``--token`` given is not a JWT whose subject can be read."""


def token_subject(token: str) -> str:
    """The ``sub`` claim of a JWT, read without verifying it (the middleware does).

    Raises:
        TokenFormatError: not three base64url parts, or no string ``sub``.
    """
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise TokenFormatError("not a JWT (three dot-separated parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError) as e:
        raise TokenFormatError(f"not a JWT: its claims do not decode ({e})") from None
    sub = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(sub, str) or not sub:
        raise TokenFormatError("the token has no subject ('sub'): it names no app")
    return sub


def app_id_for(app_id: str | None, token: str | None, default: str) -> str:
    """The app id to use: the one given, else the token's subject, else ``default``.

    The middleware requires the ``app-id`` header to match the token's subject,
    so with a token and no ``--app-id`` the token decides.

    Raises:
        TokenFormatError: a token whose subject cannot be read, and no app id given.
    """
    if app_id is not None:
        return app_id
    if token is not None:
        return token_subject(token)
    return default


def refusal(error: BaseException) -> str | None:
    """One line saying why the middleware refused the client for good, or None
    if ``error`` is not such a refusal (then it is a bug: let it raise)."""
    if isinstance(error, TimeoutError):
        return "no middleware answered at the target in time: is it running there?"
    if isinstance(error, PublishRefusedError):
        code, details = error.code, error.details
    elif isinstance(error, grpc.aio.AioRpcError):
        code, details = error.code(), error.details() or ""
    else:
        return None
    if code not in _FINAL:
        return None
    return f"the middleware refused it ({code.name}): {details}"
