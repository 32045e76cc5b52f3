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
from vehicle_middleware.contract.wire import REASON_HEADER, REASON_REPLACED, REASON_SHUTDOWN
from vehicle_middleware.ess.errors import (
    BudgetExceededError,
    InvalidFilterError,
    InvalidQueueConfigError,
    NotReadingEventsError,
)
from vehicle_middleware.server.errors import (
    AlreadyProvidedError,
    EndReason,
    FollowReplacedError,
    InvalidRequestError,
    JournalDisabledError,
    LimitExceededError,
    NothingProvidedError,
    NotServedError,
    OffsetOutOfRangeError,
    PermissionDeniedError,
    ScopeDeniedError,
    StreamConflictError,
    StreamEndedError,
    UnauthenticatedError,
    UnavailableError,
    UnknownConsumerError,
)
from vehicle_middleware.server.rpc.decoding import Malformed
from vehicle_middleware.vstore.errors import (
    InvalidKeyNameError,
    InvalidValueError,
    KeyCapacityError,
    UnknownKeyError,
    ValueTooLargeError,
    VersionConflictError,
    VStoreError,
)

__all__ = ["STATUS_OF", "STREAM_END", "check_decoded", "maps_errors", "status_for", "trailer_for"]

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
    (InvalidFilterError, grpc.StatusCode.INVALID_ARGUMENT),
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
    (NothingProvidedError, grpc.StatusCode.ABORTED),  # as the KUKSA databroker
    (NotServedError, grpc.StatusCode.UNIMPLEMENTED),
    # Its code depends on why the stream ended: STREAM_END (status_for looks there first).
    (StreamEndedError, grpc.StatusCode.ABORTED),
)
"""First match wins. Anything else is INTERNAL (and logged with its traceback).
A :class:`StreamEndedError` is looked up in :data:`STREAM_END` first.

Two statuses never pass here, since their calls never reach the middleware: a
call beyond ``max_concurrent_streams`` on one connection that its client sent
anyway is refused by the transport (HTTP/2 ``REFUSED_STREAM``), which gRPC
reports as UNAVAILABLE, ``Stream removed (... error code 7)``, and nothing of it
ran; a call beyond gRPC's bound on calls waiting to be taken up (twice
``max_pending_calls``) is cancelled by gRPC, a bare CANCELLED. The SDK retries
both (:func:`vehicle_middleware.contract.channel.retry_unary`)."""

STREAM_END: Final[dict[EndReason, tuple[grpc.StatusCode, str, str | None]]] = {
    EndReason.REPLACED: (
        grpc.StatusCode.ABORTED,
        "a newer stream of app {app!r} replaced this one",
        REASON_REPLACED,
    ),
    EndReason.EXPIRED: (
        grpc.StatusCode.UNAUTHENTICATED,
        "the token of app {app!r} expired: its stream and subscriptions are gone; "
        "reconnect with a fresh token",
        None,
    ),
    EndReason.SHUTDOWN: (
        grpc.StatusCode.UNAVAILABLE,
        "the middleware is shutting down; reconnect and subscribe again",
        REASON_SHUTDOWN,
    ),
    EndReason.CLOSED: (grpc.StatusCode.CANCELLED, "the stream of app {app!r} ended", None),
}
"""Why the middleware ended a subscriber stream -> its status, message and the
``vmw-reason`` trailer the SDK reads (whether to reconnect). The same for the
own event streams and KUKSA subscriptions. :attr:`EndReason.FAILED` is the
app's own protocol error, mapped as that error."""


def status_for(error: BaseException, *, field: str = "") -> tuple[grpc.StatusCode, str]:
    """The status code and message for a domain error.

    ``field`` names the repeated field of a batch; a core error that carries the
    index of the bad item is reported as ``field[index]: message``.
    """
    if isinstance(error, StreamEndedError):
        if error.reason is EndReason.FAILED and error.error is not None:
            return status_for(error.error, field=field)
        code, text, _ = STREAM_END[error.reason]
        return code, text.format(app=error.app)
    for kind, code in STATUS_OF:
        if isinstance(error, kind):
            message = str(error)
            index = error.index if isinstance(error, VStoreError) else None
            if field and index is not None:
                message = f"{field}[{index}]: {message}"
            return code, message
    return grpc.StatusCode.INTERNAL, "internal error (logged by the middleware)"


def trailer_for(error: BaseException) -> tuple[tuple[str, str], ...]:
    """The trailing metadata that goes with the error's status (the stream end's reason)."""
    if isinstance(error, StreamEndedError) and error.reason in STREAM_END:
        reason = STREAM_END[error.reason][2]
        if reason is not None:
            return ((REASON_HEADER, reason),)
    return ()


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
                await context.abort(code, message, trailing_metadata=trailer_for(e))

        return mapped  # type: ignore[return-value]

    return wrap
