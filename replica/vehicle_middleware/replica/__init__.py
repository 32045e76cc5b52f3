"""replica: the replicated model of several middleware nodes.

The rules: docs/design.md, "Several nodes" and "Ordered writes".

Pure and synchronous: no I/O, no gRPC, time from injected clocks. The
middleware's ``vehicle_middleware.server.cluster`` carries it over gRPC peer links and
applies its decisions to the V-Store.

Owns the replicated events, their chains and the leaf-hash sync, the
confirmation and apply rules, the conflict rule and compaction. Imports only
the standard library and ``vstore``; must not import ``middleware``
(``tests/unit/test_layout.py``).
"""

from vehicle_middleware.replica.chains import Chain, HeldEvent, Retention
from vehicle_middleware.replica.events import (
    ChainId,
    Event,
    HybridClock,
    Kind,
    Order,
    Write,
    event_hash,
    make_event,
)
from vehicle_middleware.replica.keys import KeyState, KeyStates
from vehicle_middleware.replica.messages import (
    GetData,
    Horizon,
    Leaf,
    Outgoing,
    Refusal,
    Refused,
    Sync,
)
from vehicle_middleware.replica.model import (
    ALL_CONFIRMS,
    GuardRefusal,
    Model,
    ModelStatus,
    PeerStatus,
    Sink,
)

__all__ = [
    "ALL_CONFIRMS",
    "Chain",
    "ChainId",
    "Event",
    "GetData",
    "GuardRefusal",
    "HeldEvent",
    "Horizon",
    "HybridClock",
    "KeyState",
    "KeyStates",
    "Kind",
    "Leaf",
    "Model",
    "ModelStatus",
    "Order",
    "Outgoing",
    "PeerStatus",
    "Refusal",
    "Refused",
    "Retention",
    "Sink",
    "Sync",
    "Write",
    "event_hash",
    "make_event",
]
