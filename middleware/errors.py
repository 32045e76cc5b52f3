"""Errors the middleware itself raises (the cores have their own ``errors.py``).

Mapped to gRPC status codes, with the cores' errors, in one table:
:mod:`middleware.rpc.status`.
"""

from __future__ import annotations

__all__ = ["InvalidRequestError", "MiddlewareError", "UnauthenticatedError"]


class MiddlewareError(Exception):
    """Base of the middleware's own errors."""


class UnauthenticatedError(MiddlewareError, PermissionError):
    """The caller did not say who it is, or said it badly."""


class InvalidRequestError(MiddlewareError, ValueError):
    """A request is malformed as a whole: empty, too large, a bad field.

    Attributes:
        field: the offending field path, e.g. ``subscriptions`` or ``names[3]``.
        reason: what is wrong and what is allowed.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")
