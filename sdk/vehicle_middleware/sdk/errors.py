"""Errors the SDK raises itself (a refusal by the middleware is its gRPC status)."""

from __future__ import annotations

__all__ = ["MiddlewareUnreachableError"]


class MiddlewareUnreachableError(TimeoutError):
    """No middleware answered at the address within the time given.

    Attributes:
        target: the address dialed.
        timeout: the seconds waited.
    """

    def __init__(self, target: str, timeout: float, *, tls: bool) -> None:
        self.target = target
        self.timeout = timeout
        hint = (
            "is it running there, and does it serve TLS with a certificate this CA signed?"
            if tls
            else "is it running there? (a middleware serving TLS needs the client's Tls)"
        )
        super().__init__(f"no middleware answered at {target} within {timeout:g} s: {hint}")
