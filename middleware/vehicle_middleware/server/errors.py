"""Errors the middleware itself raises (the cores have their own ``errors.py``).

Mapped to gRPC status codes, with the cores' errors, in one table:
:mod:`vehicle_middleware.server.rpc.status`.
"""

from __future__ import annotations

import enum

__all__ = [
    "ActuationUnavailableError",
    "AlreadyProvidedError",
    "EndReason",
    "FollowReplacedError",
    "InvalidRequestError",
    "JournalDisabledError",
    "LimitExceededError",
    "MiddlewareError",
    "NotServedError",
    "OffsetOutOfRangeError",
    "PermissionDeniedError",
    "ScopeDeniedError",
    "StreamConflictError",
    "StreamEndedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnknownConsumerError",
]


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


class PermissionDeniedError(MiddlewareError, PermissionError):
    """The caller may not do this to this key."""

    def __init__(self, app: str, action: str, key: str, why: str, *, field: str = "") -> None:
        self.app = app
        self.action = action
        self.key = key
        where = f"{field}: " if field else ""
        super().__init__(f"{where}app {app!r} may not {action} key {key!r} ({why})")


class LimitExceededError(MiddlewareError):
    """A configured limit would be exceeded; the message names it and its value."""

    def __init__(self, what: str, limit: float, detail: str) -> None:
        self.what = what
        self.limit = limit
        super().__init__(f"{what}: {detail}; the limit is {limit:g}")


class StreamConflictError(MiddlewareError):
    """A precondition about the caller's streams does not hold."""


class EndReason(enum.Enum):
    """Why a subscriber stream ended (the value is what the journal records)."""

    CLOSED = "closed"
    """The app ended the call, or went away (not an error: no status to send)."""
    REPLACED = "replaced"
    """A newer stream of the same app took over."""
    EXPIRED = "token expired"
    """The app's token expired."""
    SHUTDOWN = "shutdown"
    """The middleware is shutting down."""
    FAILED = "failed"
    """The app broke the stream's protocol (the error says how)."""


class StreamEndedError(MiddlewareError):
    """The middleware ended a subscriber stream; ``reason`` says why.

    Its status comes from :data:`vehicle_middleware.server.rpc.status.STREAM_END`, the same
    for every API's streams; with :attr:`EndReason.FAILED` the app's protocol
    error (``error``) is the status instead.
    """

    def __init__(self, reason: EndReason, app: str, error: Exception | None = None) -> None:
        self.reason = reason
        self.app = app
        self.error = error
        super().__init__(f"the stream of app {app!r} ended: {reason.value}")


class NotServedError(MiddlewareError):
    """A call of a served API that this middleware does not implement."""

    def __init__(self, method: str, instead: str) -> None:
        self.method = method
        super().__init__(f"{method} is not served by this middleware; {instead}")


class UnavailableError(MiddlewareError):
    """The middleware cannot serve this now (shutting down; a provider missing)."""


class ActuationUnavailableError(UnavailableError):
    """An actuation cannot be delivered: no provider claims the actuator, or it
    did not answer within the actuation timeout."""

    def __init__(self, key: str, why: str) -> None:
        self.key = key
        super().__init__(f"cannot actuate {key!r}: {why}")


class AlreadyProvidedError(MiddlewareError):
    """Another provider already provides (claims) this actuator."""

    def __init__(self, key: str, owner: str) -> None:
        self.key = key
        self.owner = owner
        super().__init__(f"actuator {key!r} is already provided by {owner!r}")


class NothingProvidedError(MiddlewareError):
    """A provider stream's request about the signals it speaks for (``field``) came
    before the stream provided or published any."""

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(
            f"{field}: this stream provides no signal yet; "
            "send a ProvideSignalRequest (or publish) first"
        )


class ScopeDeniedError(MiddlewareError, PermissionError):
    """The caller's token lacks a scope the call needs (not about one key)."""

    def __init__(self, app: str, what: str, scope: str) -> None:
        self.app = app
        self.scope = scope
        super().__init__(f"app {app!r} may not {what}: its token has no {scope!r} scope")


class JournalDisabledError(MiddlewareError):
    """The middleware runs without a journal, so there is nothing to consume."""


class UnknownConsumerError(MiddlewareError, LookupError):
    """A journal consumer that is not registered."""

    def __init__(self, app: str, component: str) -> None:
        self.app = app
        self.component = component
        super().__init__(
            f"component {component!r} of app {app!r} is not a registered journal consumer: "
            "call RegisterConsumer first (or poll as LIVE, which pins nothing)"
        )


class OffsetOutOfRangeError(MiddlewareError, ValueError):
    """A journal offset that the boot it is given with never wrote."""


class FollowReplacedError(MiddlewareError):
    """A newer Follow stream of the same consumer took over."""
