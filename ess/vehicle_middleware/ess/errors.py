"""Errors raised by the ESS.

One class per failure, each narrowing the built-in a caller would expect, with
typed attributes; the gRPC layer maps them to status codes in one table.
Per-key outcomes of ``register``/``deregister`` (not found, permission
denied, invalid) are results, not exceptions: one bad key must not fail the
others.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "EssError",
    "InvalidFilterError",
    "InvalidQueueConfigError",
    "NotReadingEventsError",
]


class EssError(Exception):
    """Base of every error the ESS raises."""


class NotReadingEventsError(EssError, LookupError):
    """The app has no open event stream; it must call ``get_events`` first."""

    def __init__(self, app: str) -> None:
        self.app = app
        super().__init__(
            f"app {app!r} has no open event stream: open it with GetEvents before registering"
        )


class InvalidQueueConfigError(EssError, ValueError):
    """A queue configuration asked for something the ESS does not allow.

    Attributes:
        field: the offending field, e.g. ``queues[1].min_length``.
        reason: what is wrong and what is allowed.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class InvalidFilterError(EssError, ValueError):
    """A subscription's filter asked for something the ESS does not allow.

    Attributes:
        field: the offending field, e.g. ``filter.threshold``.
        reason: what is wrong and what is allowed.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class BudgetExceededError(EssError, MemoryError):
    """The global event budget cannot reserve the requested minimum queue lengths."""

    def __init__(self, app: str, requested: int, available: int, total: int) -> None:
        self.app = app
        self.requested = requested
        self.available = available
        self.total = total
        super().__init__(
            f"cannot reserve {requested} queued events for app {app!r}: "
            f"{available} of the global event budget of {total} are free; "
            "ask for smaller min_length values or retry later"
        )
