"""Domain errors -> gRPC status codes: the one table, and the decorators that apply it.

Servicers never choose a status code inline: they raise (or let the cores
raise) a typed error, and :func:`unary` / :func:`stream` turn it into a status
code and a message that says what was wrong and what is allowed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import grpc
from vmw.ess.errors import BudgetExceededError, InvalidQueueConfigError, NotReadingEventsError
from vmw.server.errors import (
    AlreadyProvidedError,
    FollowReplacedError,
    InvalidRequestError,
    JournalDisabledError,
    LimitExceededError,
    OffsetOutOfRangeError,
    PermissionDeniedError,
    ScopeDeniedError,
    StreamConflictError,
    UnauthenticatedError,
    UnavailableError,
    UnknownConsumerError,
)
from vmw.server.rpc.decoding import Malformed
from vmw.vstore.errors import (
    InvalidKeyNameError,
    InvalidValueError,
    KeyCapacityError,
    UnknownKeyError,
    ValueTooLargeError,
    VersionConflictError,
    VStoreError,
)

__all__ = ["STATUS_OF", "check_decoded", "maps_errors", "status_for"]

log = logging.getLogger(__name__)

STATUS_OF: Final[tuple[tuple[type[BaseException], grpc.StatusCode], ...]] = (
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (LimitExceededError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (StreamConflictError, grpc.StatusCode.FAILED_PRECONDITION),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (AlreadyProvidedError, grpc.StatusCode.ALREADY_EXISTS),
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotReadingEventsError, grpc.StatusCode.FAILED_PRECONDITION),
    (InvalidQueueConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (BudgetExceededError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (InvalidKeyNameError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnknownKeyError, grpc.StatusCode.NOT_FOUND),
    (ValueTooLargeError, grpc.StatusCode.INVALID_ARGUMENT),
    (InvalidValueError, grpc.StatusCode.INVALID_ARGUMENT),
    (VersionConflictError, grpc.StatusCode.ABORTED),
    (KeyCapacityError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ScopeDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (JournalDisabledError, grpc.StatusCode.FAILED_PRECONDITION),
    (UnknownConsumerError, grpc.StatusCode.NOT_FOUND),
    (OffsetOutOfRangeError, grpc.StatusCode.OUT_OF_RANGE),
    (FollowReplacedError, grpc.StatusCode.ABORTED),
)
"""First match wins. Anything else is INTERNAL (and logged with its traceback)."""


def status_for(error: BaseException, *, field: str = "") -> tuple[grpc.StatusCode, str]:
    """The status code and message for a domain error.

    ``field`` names the repeated field of a batch; a core error that carries the
    index of the bad item is reported as ``field[index]: message``.
    """
    for kind, code in STATUS_OF:
        if isinstance(error, kind):
            message = str(error)
            index = error.index if isinstance(error, VStoreError) else None
            if field and index is not None:
                message = f"{field}[{index}]: {message}"
            return code, message
    return grpc.StatusCode.INTERNAL, "internal error (logged by the middleware)"


_H = TypeVar("_H", bound=Callable[..., Awaitable[Any]])


def check_decoded(request: Any) -> None:
    """Raise InvalidRequestError for a request that did not decode."""
    if isinstance(request, Malformed):
        raise InvalidRequestError(
            "request",
            f"not a valid message for {request.method} ({request.reason}); "
            "strings must be valid UTF-8",
        )


def maps_errors(field: str = "") -> Callable[[_H], _H]:
    """Decorate an async handler ``(self, request, context)`` to map errors to a status.

    Args:
        field: the request's repeated field, used to name a batch item's index.
    """

    def wrap(handler: _H) -> _H:
        @functools.wraps(handler)
        async def mapped(
            self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> Any:
            try:
                check_decoded(request)
                return await handler(self, request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as e:
                if context.done() or context.cancelled():
                    # The call already ended (the peer went away, e.g. while a write
                    # was under way, or its status was being sent): nobody to tell.
                    log.debug("%s: %s after the call ended", handler.__qualname__, e)
                    return None
                code, message = status_for(e, field=field)
                if code is grpc.StatusCode.INTERNAL:
                    log.exception("%s failed", handler.__qualname__)
                await context.abort(code, message)

        return mapped  # type: ignore[return-value]

    return wrap
