"""Subscriptions: who wants events of which key, on which queue, when.

The :class:`SubscriptionTable` maps key id -> {app -> subscription} (the
ESS's subscription map, docs/design.md) and app -> {key id -> subscription}, and keeps the
watched-key bitmap in step: a key's bit is set iff its subscriber map is
non-empty; ``on_watch`` hears of every such change (the ESS follows watched
keys' health with it). It stores and indexes; the ESS decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from vehicle_middleware.contract.wire import SEQ_CYCLE
from vehicle_middleware.ess.errors import InvalidFilterError
from vehicle_middleware.ess.events import Status, Trigger
from vehicle_middleware.ess.filters import Filter
from vehicle_middleware.ess.gates import FilterGate
from vehicle_middleware.ess.queues import EventQueue
from vehicle_middleware.ess.watch import WatchedKeys

__all__ = [
    "MAX_SEQ",
    "RegisterResult",
    "Subscription",
    "SubscriptionInfo",
    "SubscriptionRequest",
    "SubscriptionTable",
]

MAX_SEQ: Final = SEQ_CYCLE
"""Sequence numbers are uint32; after MAX_SEQ the next one is 1 (0 is never used): the
wire's cycle (:data:`vehicle_middleware.contract.wire.SEQ_CYCLE`), which apps count with too."""


@dataclass(frozen=True, slots=True)
class SubscriptionRequest:
    """One subscription an app asks for, by key name."""

    key: str
    queue: int = 0
    trigger: Trigger = Trigger.ON_CHANGE
    want_current: bool = False
    with_value: bool = False
    """Every event carries the value, also an ON_UPDATE event of a write that stored
    equal bytes (which otherwise carries none): for a consumer that sends a value
    with every update, such as a KUKSA subscription. The value is the stored bytes
    object (no copy)."""
    filter: Filter | None = None
    """What to sample (:mod:`vehicle_middleware.ess.filters`); None: every event the
    trigger selects."""
    filter_error: InvalidFilterError | None = None
    """The filter the app asked was invalid (the transport could not build it): the
    key's result is INVALID_ARGUMENT with this error's field and rule, after the
    checks of any key (name, permission, existence)."""


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """Per-key outcome of register / deregister, in request order.

    ``key_id`` is 0 when the key was not resolved. ``current`` is the key's
    value when it was asked for and the key has been written. ``seq`` is
    described below.
    """

    key: str
    key_id: int
    status: Status
    current: bytes | None = None
    detail: str = ""
    seq: int = 0
    """The seq of the subscription's last event (0 for a new subscription): the
    next event is seq + 1, so an app can tell resumed from new."""
    no_provider: bool = False
    """The key's provider went away and nobody claims it since (``ProviderGone``)."""


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """A subscription as reported to its app."""

    key: str
    key_id: int
    queue: int
    trigger: Trigger
    filter: Filter | None = None


class Subscription:
    """One (app, key) subscription and its delivery state. Mutable, ESS-internal."""

    __slots__ = (
        "app",
        "every_write",
        "filter",
        "gate",
        "key",
        "name",
        "owes_data",
        "push",
        "seq",
        "target",
        "trigger",
        "with_value",
    )

    def __init__(
        self,
        app: str,
        key: int,
        name: str,
        trigger: Trigger,
        target: EventQueue,
        *,
        with_value: bool = False,
        filter: Filter | None = None,
    ) -> None:
        self.app = app
        self.key = key
        self.name = name
        self.trigger = trigger
        self.every_write = trigger is Trigger.ON_UPDATE
        self.with_value = with_value
        """Every event carries the value (``SubscriptionRequest.with_value``)."""
        self.filter = filter
        """What to sample; None: every event the trigger selects."""
        self.target = target
        self.gate: FilterGate | None = None
        """The filter applied (:mod:`vehicle_middleware.ess.gates`), set by the ESS."""
        # Bound once: saves a lookup per event on the hot path. A filtered
        # subscription's is its gate's push, of the same signature.
        self.push: Callable[[Any, int, Any, bytes | None], bool] = target.push
        self.seq = 0
        """The seq of the last event generated for this subscription."""
        self.owes_data = False
        """An event that carried data was lost: the next queued event must carry the value."""

    def retarget(self, trigger: Trigger, target: EventQueue, *, with_value: bool = False) -> None:
        """Apply a re-registration: new trigger, queue and ``with_value``, same seq (the
        ESS sets the filter and its gate: :meth:`set_gate`)."""
        self.trigger = trigger
        self.every_write = trigger is Trigger.ON_UPDATE
        self.with_value = with_value
        self.target = target
        self.push = target.push if self.gate is None else self.gate.push

    def set_gate(self, gate: FilterGate | None) -> None:
        """Apply ``gate`` (None: no filter) from the next write on; a gate replaced is
        closed (its held value discarded)."""
        if self.gate is not None and self.gate is not gate:
            self.gate.close()
        self.gate = gate
        self.push = self.target.push if gate is None else gate.push

    def info(self) -> SubscriptionInfo:
        return SubscriptionInfo(self.name, self.key, self.target.number, self.trigger, self.filter)


class SubscriptionTable:
    """Subscriptions indexed by key and by app, with the watched bitmap in step."""

    __slots__ = ("_by_app", "by_key", "on_change", "on_watch", "watched")

    def __init__(self, watched: WatchedKeys) -> None:
        self.watched = watched
        self.on_watch: Callable[[int, str | None], None] | None = None
        """Told ``(key, name)`` when a key gets its first subscriber and ``(key,
        None)`` when it loses its last one, after the table changed."""
        self.on_change: Callable[[int], None] | None = None
        """Told ``key`` after a subscription on it was added or removed or its
        filter changed (a key's demand, :mod:`vehicle_middleware.ess.demand`)."""
        self.by_key: dict[int, dict[str, Subscription]] = {}
        """key id -> app -> subscription. Read-only outside this class (the ESS hot path)."""
        self._by_app: dict[str, dict[int, Subscription]] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_app.values())

    def get(self, app: str, key: int) -> Subscription | None:
        """The subscription of ``app`` on ``key``, if any. O(1)."""
        subs = self._by_app.get(app)
        return subs.get(key) if subs else None

    def count_of(self, app: str) -> int:
        """How many subscriptions ``app`` holds. O(1)."""
        return len(self._by_app.get(app, ()))

    def of_app(self, app: str) -> list[Subscription]:
        """The app's subscriptions, in registration order."""
        return list(self._by_app.get(app, {}).values())

    def add(self, sub: Subscription) -> None:
        """Insert a new subscription; (app, key) must not be subscribed yet. O(1)."""
        subs = self.by_key.get(sub.key)
        if subs is None:
            self.by_key[sub.key] = subs = {}
            self.watched.set(sub.key)
        assert sub.app not in subs
        subs[sub.app] = sub
        self._by_app.setdefault(sub.app, {})[sub.key] = sub
        if len(subs) == 1 and self.on_watch is not None:
            self.on_watch(sub.key, sub.name)
        if self.on_change is not None:
            self.on_change(sub.key)

    def refiltered(self, sub: Subscription) -> None:
        """``sub`` (in the table) changed its filter: tell ``on_change``. O(1)."""
        if self.on_change is not None:
            self.on_change(sub.key)

    def remove(self, app: str, key: int) -> Subscription | None:
        """Remove and return the subscription of ``app`` on ``key``, if any. O(1)."""
        app_subs = self._by_app.get(app)
        if not app_subs or key not in app_subs:
            return None
        sub = app_subs.pop(key)
        if not app_subs:
            del self._by_app[app]
        self._drop_from_key(app, key)
        return sub

    def remove_key(self, key: int) -> list[Subscription]:
        """Remove and return every subscription on ``key``. O(subscribers)."""
        subs = self.by_key.pop(key, None)
        if not subs:
            return []
        self.watched.clear(key)
        for app in subs:
            app_subs = self._by_app[app]
            del app_subs[key]
            if not app_subs:
                del self._by_app[app]
        if self.on_watch is not None:
            self.on_watch(key, None)
        if self.on_change is not None:
            self.on_change(key)
        return list(subs.values())

    def remove_app(self, app: str) -> list[Subscription]:
        """Remove and return every subscription of ``app``. O(its subscriptions)."""
        app_subs = self._by_app.pop(app, None)
        if not app_subs:
            return []
        for key in app_subs:
            self._drop_from_key(app, key)
        return list(app_subs.values())

    def _drop_from_key(self, app: str, key: int) -> None:
        subs = self.by_key[key]
        del subs[app]
        if not subs:
            del self.by_key[key]
            self.watched.clear(key)
            if self.on_watch is not None:
                self.on_watch(key, None)
        if self.on_change is not None:
            self.on_change(key)

    def check(self) -> None:
        """Assert the table's invariants, the watched bitmap included (for tests)."""
        pairs_by_key = {(a, k) for k, subs in self.by_key.items() for a in subs}
        pairs_by_app = {(a, k) for a, subs in self._by_app.items() for k in subs}
        assert pairs_by_key == pairs_by_app, "key and app indexes disagree"
        for key, subs in self.by_key.items():
            assert subs, f"empty subscriber map kept for key {key}"
            for app, sub in subs.items():
                assert sub.key == key
                assert sub.app == app
                assert self._by_app[app][key] is sub
                assert 0 <= sub.seq <= MAX_SEQ
                assert sub.every_write == (sub.trigger is Trigger.ON_UPDATE)
                gate = sub.gate
                if gate is None:
                    assert sub.filter is None or sub.filter.empty, "a filter without a gate"
                else:
                    assert gate.sub is sub
                    assert gate.live
                    assert gate.filter == sub.filter
                    gate.check()
        for subs_of_app in self._by_app.values():
            assert subs_of_app, "empty app map kept"
        assert self.watched.watched() == sorted(self.by_key), "watched bitmap != subscribed keys"
