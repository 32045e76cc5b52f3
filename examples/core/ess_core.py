"""The V-Store and the ESS without a server (docs/design.md, "Using the core").

    .venv/bin/python examples/core/ess_core.py

with the two cores installed (``pip install ./vstore ./ess``; no gRPC). A key
is added, an app opens its stream with one queue and subscribes to the key, a
write fires the ESS, and the app's queue is drained: it prints that one event.
"""

from __future__ import annotations

from vehicle_middleware.ess import EventSubSystem, QueueConfig, SubscriptionRequest, Trigger
from vehicle_middleware.vstore import VStore

store = VStore()  # max value 64 KiB, up to 1,000,000 keys
ess = EventSubSystem(store)  # global event budget 20,000 events
store.set_listener(ess)

speed = store.add_key("Vehicle.Speed")  # -> 1 (idempotent)
ess.open_stream("dashboard", [QueueConfig(0, min_length=10, max_length=50)])
ess.register(
    "dashboard",
    [SubscriptionRequest("Vehicle.Speed", queue=0, trigger=Trigger.ON_CHANGE, want_current=True)],
)
store.set(speed, b"\x32")  # fires data_updated(1, changed=True, data=b"2", time_ns=...)
events = ess.drain("dashboard", 100)  # [DataUpdated(key=1, seq=1, time_ns=..., data=b'2', queue=0)]
print(events)
