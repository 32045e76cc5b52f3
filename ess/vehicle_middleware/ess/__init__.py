"""ess: the Event Sub-System of the vehicle middleware.

Owns subscriptions, the watched-key bitmap, the per-app bounded queues with the
drop rule and per-key seq, the lifecycle buffer (key added/removed, resync,
health events), the global event budget and the drain scheduler. It listens
to the V-Store and hands batches of events to a transport; it tells
subscribers when a watched key goes stale or loses its provider (health
events). Pure and synchronous: no I/O, no gRPC, no event loop.

Imports the standard library, ``bitarray`` and ``vstore``; must not import
``middleware`` or any transport (``tests/unit/test_layout.py``).
"""

from vehicle_middleware.ess.budget import EventBudget
from vehicle_middleware.ess.config import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_MIN_LENGTH,
    MAX_QUEUE_LENGTH,
    QUEUE_COUNT,
    QueueConfig,
    effective_queue_configs,
)
from vehicle_middleware.ess.demand import UNWATCHED, DemandTracker, KeyDemand, demand_of
from vehicle_middleware.ess.errors import (
    BudgetExceededError,
    EssError,
    InvalidFilterError,
    InvalidQueueConfigError,
    NotReadingEventsError,
)
from vehicle_middleware.ess.events import (
    ONE_WRITE_MAX,
    DataRow,
    DataUpdated,
    DropReason,
    Event,
    HealthEvent,
    KeyAdded,
    KeyFresh,
    KeyRemoved,
    KeyStale,
    LifecycleEvent,
    ProviderBack,
    ProviderGone,
    RawEvent,
    ResyncRequired,
    Status,
    Trigger,
    as_row,
    data_rows,
    pack_queue,
    unpack_queue,
)
from vehicle_middleware.ess.filters import MAX_INTERVAL_NS, MIN_INTERVAL_NS, Filter
from vehicle_middleware.ess.gates import NO_NUMBERS, Numbers
from vehicle_middleware.ess.health import (
    ExpectedPeriods,
    StaleNotice,
    StaleTracker,
    parse_expect_rule,
)
from vehicle_middleware.ess.policy import ALLOW_ALL, AllowAll, ReadPolicy
from vehicle_middleware.ess.presence import ProviderPresence
from vehicle_middleware.ess.scheduler import DEFAULT_WEIGHTS, CreditScheduler
from vehicle_middleware.ess.stats import AppStats, QueueStats
from vehicle_middleware.ess.subscriptions import (
    MAX_SEQ,
    RegisterResult,
    SubscriptionInfo,
    SubscriptionRequest,
)
from vehicle_middleware.ess.system import (
    DEFAULT_EVENT_BUDGET,
    DEFAULT_LIFECYCLE_CAPACITY,
    DropCounts,
    EssObserver,
    EventSubSystem,
    KeySource,
)

__all__ = [
    "ALLOW_ALL",
    "DEFAULT_EVENT_BUDGET",
    "DEFAULT_LIFECYCLE_CAPACITY",
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_MIN_LENGTH",
    "DEFAULT_WEIGHTS",
    "MAX_INTERVAL_NS",
    "MAX_QUEUE_LENGTH",
    "MAX_SEQ",
    "MIN_INTERVAL_NS",
    "NO_NUMBERS",
    "ONE_WRITE_MAX",
    "QUEUE_COUNT",
    "UNWATCHED",
    "AllowAll",
    "AppStats",
    "BudgetExceededError",
    "CreditScheduler",
    "DataRow",
    "DataUpdated",
    "DemandTracker",
    "DropCounts",
    "DropReason",
    "EssError",
    "EssObserver",
    "Event",
    "EventBudget",
    "EventSubSystem",
    "ExpectedPeriods",
    "Filter",
    "HealthEvent",
    "InvalidFilterError",
    "InvalidQueueConfigError",
    "KeyAdded",
    "KeyDemand",
    "KeyFresh",
    "KeyRemoved",
    "KeySource",
    "KeyStale",
    "LifecycleEvent",
    "NotReadingEventsError",
    "Numbers",
    "ProviderBack",
    "ProviderGone",
    "ProviderPresence",
    "QueueConfig",
    "QueueStats",
    "RawEvent",
    "ReadPolicy",
    "RegisterResult",
    "ResyncRequired",
    "StaleNotice",
    "StaleTracker",
    "Status",
    "SubscriptionInfo",
    "SubscriptionRequest",
    "Trigger",
    "as_row",
    "data_rows",
    "demand_of",
    "effective_queue_configs",
    "pack_queue",
    "parse_expect_rule",
    "unpack_queue",
]
