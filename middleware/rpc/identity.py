"""Who is calling: authenticate a call's metadata (and, with mutual TLS, its
client certificate) through the runtime's access rules."""

from __future__ import annotations

from typing import Any

import grpc

from middleware.access import Access, Caller
from middleware.tls import certificate_names

__all__ = ["caller", "certified_names"]


def certified_names(
    context: grpc.aio.ServicerContext[Any, Any], access: Access
) -> tuple[str, ...] | None:
    """The names of the call's client certificate with mutual TLS on, else None
    (read only then: a plaintext middleware pays nothing per call)."""
    return certificate_names(context.auth_context()) if access.mutual_tls else None


def caller(context: grpc.aio.ServicerContext[Any, Any], access: Access) -> Caller:
    """The authenticated caller, admitted by its rate limit.

    Raises:
        UnauthenticatedError, LimitExceededError.
    """
    return access.authenticate(
        tuple(context.invocation_metadata() or ()),
        context.peer() or "",
        certified=certified_names(context, access),
    )
