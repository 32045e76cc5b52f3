"""Queue configuration: what an app may ask for when it opens its stream.

Each app has three queues, numbered 0, 1 and 2. For each, the app may choose
``min_length`` (events reserved for it in the global event budget, always
available to it) and ``max_length`` (the most events the queue holds; above
``min_length`` it grows only while the shared part of the budget has room).
``max_length`` is capped at :data:`MAX_QUEUE_LENGTH` (200): asking for more is
not an error, the effective configuration says what was granted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.ess.errors import InvalidQueueConfigError

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_MIN_LENGTH",
    "MAX_QUEUE_LENGTH",
    "QUEUE_COUNT",
    "QueueConfig",
    "effective_queue_configs",
]

QUEUE_COUNT: Final = 3
MAX_QUEUE_LENGTH: Final = 200
DEFAULT_MIN_LENGTH: Final = 10
DEFAULT_MAX_LENGTH: Final = 100


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Requested or effective lengths of one queue."""

    queue: int
    min_length: int = DEFAULT_MIN_LENGTH
    max_length: int = DEFAULT_MAX_LENGTH


def effective_queue_configs(
    requested: Iterable[QueueConfig],
) -> tuple[QueueConfig, QueueConfig, QueueConfig]:
    """Validate an app's requested queue configs and return the effective three.

    Queues not mentioned get the defaults (min 10, max 100). ``max_length``
    above 200 is capped to 200, and ``min_length`` with it.

    Raises:
        InvalidQueueConfigError: a queue number outside 0..2, a queue given
            twice, ``max_length`` 0, or ``min_length`` > ``max_length``.
    """
    chosen: dict[int, QueueConfig] = {}
    for i, cfg in enumerate(requested):
        where = f"queues[{i}]"
        for name in ("queue", "min_length", "max_length"):
            value = getattr(cfg, name)
            if type(value) is not int:
                raise InvalidQueueConfigError(
                    f"{where}.{name}", f"must be an integer, got {value!r}"
                )
        if not 0 <= cfg.queue < QUEUE_COUNT:
            raise InvalidQueueConfigError(
                f"{where}.queue", f"queue {cfg.queue} does not exist; queues are 0, 1 and 2"
            )
        if cfg.queue in chosen:
            raise InvalidQueueConfigError(
                f"{where}.queue", f"queue {cfg.queue} is configured more than once"
            )
        if cfg.max_length < 1:
            raise InvalidQueueConfigError(
                f"{where}.max_length",
                f"must be at least 1 (at most {MAX_QUEUE_LENGTH}), got {cfg.max_length}",
            )
        if cfg.min_length < 0 or cfg.min_length > cfg.max_length:
            raise InvalidQueueConfigError(
                f"{where}.min_length",
                f"must be in 0..max_length ({cfg.max_length}), got {cfg.min_length}",
            )
        cap = min(cfg.max_length, MAX_QUEUE_LENGTH)
        chosen[cfg.queue] = QueueConfig(cfg.queue, min(cfg.min_length, cap), cap)
    q0, q1, q2 = (chosen.get(q, QueueConfig(q)) for q in range(QUEUE_COUNT))
    return q0, q1, q2
