"""Who is calling: authenticate a call's metadata through the runtime's access rules."""

from __future__ import annotations

from typing import Any

import grpc

from middleware.access import Access, Caller

__all__ = ["caller"]


def caller(context: grpc.aio.ServicerContext[Any, Any], access: Access) -> Caller:
    """The authenticated caller, admitted by its rate limit.

    Raises:
        UnauthenticatedError, LimitExceededError.
    """
    return access.authenticate(tuple(context.invocation_metadata() or ()), context.peer() or "")
