"""A plain reference model of the V-Store and the ESS, for the state-machine test.

Written for obviousness, not speed: lists and linear scans, straight from the
rules of docs/design.md. The real structures must agree with it after
every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vehicle_middleware.ess import (
    DataUpdated,
    Event,
    KeyAdded,
    KeyRemoved,
    QueueConfig,
    ResyncRequired,
    Status,
    Trigger,
)

MAX_SEQ = 2**32 - 1


@dataclass
class MKey:
    id: int
    value: bytes | None = None
    version: int = 0


@dataclass
class MSub:
    queue: int
    trigger: Trigger
    name: str
    seq: int = 0
    owes: bool = False


@dataclass
class MApp:
    mins: list[int]
    maxs: list[int]
    queues: list[list[list[object]]] = field(default_factory=lambda: [[], [], []])
    lifecycle: list[Event] = field(default_factory=list)
    lost: int = 0
    credits: list[int] = field(default_factory=lambda: [12, 3, 1])
    drops: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    # per queue: delivered, evicted, lost, discarded (kept when keys go)
    totals: list[list[int]] = field(default_factory=lambda: [[0] * 4 for _ in range(3)])
    peak: list[int] = field(default_factory=lambda: [0, 0, 0])


class Model:
    def __init__(self, *, budget: int, lifecycle_capacity: int, weights: tuple[int, int, int]):
        self.keys: dict[str, MKey] = {}
        self.max_id = 0
        self.budget = budget
        self.cap = lifecycle_capacity
        self.weights = list(weights)
        self.apps: dict[str, MApp] = {}
        # key id -> app -> sub, in insertion order like the real table
        self.subs: dict[int, dict[str, MSub]] = {}

    # -- store --
    def add_key(self, name: str) -> int:
        if name in self.keys:
            return self.keys[name].id
        used = {k.id for k in self.keys.values()}
        free = [i for i in range(1, self.max_id + 1) if i not in used]
        key_id = min(free) if free else self.max_id + 1
        self.max_id = max(self.max_id, key_id)
        self.keys[name] = MKey(key_id)
        for app_name, app in self.apps.items():
            self._lifecycle(app, KeyAdded(key_id, name))
            del app_name
        return key_id

    def remove_key(self, name: str) -> None:
        key = self.keys.pop(name)
        subs = self.subs.pop(key.id, {})
        for app_name in subs:
            self._discard_key(app_name, key.id)
        for app in self.apps.values():
            for qn in range(3):
                app.drops.pop((key.id, qn), None)
        for app in self.apps.values():
            self._lifecycle(app, KeyRemoved(key.id, name))

    def set(self, name: str, data: bytes) -> int:
        key = self.keys[name]
        changed = key.value is None or key.value != data
        key.value = data
        key.version += 1
        self._data_updated(key.id, changed, data)
        return key.version

    # -- ess --
    def free(self) -> int:
        used = 0
        for app in self.apps.values():
            used += sum(app.mins)
            used += sum(max(0, len(q) - m) for q, m in zip(app.queues, app.mins, strict=True))
        return self.budget - used

    def _count(self, app: MApp, key: int, queue: int, slot: int) -> None:
        app.drops.setdefault((key, queue), [0, 0, 0])[slot] += 1
        app.totals[queue][slot + 1] += 1

    def _data_updated(self, key_id: int, changed: bool, value: bytes) -> None:
        for app_name, sub in self.subs.get(key_id, {}).items():
            if not changed and sub.trigger is Trigger.ON_CHANGE:
                continue
            data = value if (changed or sub.owes) else None
            sub.seq = sub.seq + 1 if sub.seq != MAX_SEQ else 1
            app = self.apps[app_name]
            if self._push(app, sub.queue, [key_id, sub.seq, 0, data, sub.queue]):
                sub.owes = False
            elif data is not None:
                sub.owes = True

    def _push(self, app: MApp, qn: int, ev: list[object]) -> bool:
        q = app.queues[qn]
        full = len(q) >= app.maxs[qn] or (len(q) >= app.mins[qn] and self.free() <= 0)
        if full:
            same = [i for i, e in enumerate(q) if e[0] == ev[0]]
            if not same:
                self._count(app, ev[0], qn, 1)  # type: ignore[arg-type]
                return False
            old = q.pop(same[0])
            if old[3] is not None:
                rest = [e for e in q if e[0] == ev[0]]
                if rest:
                    if rest[0][3] is None:
                        rest[0][3] = old[3]
                elif ev[3] is None:
                    ev[3] = old[3]
            self._count(app, ev[0], qn, 0)  # type: ignore[arg-type]
        q.append(ev)
        app.peak[qn] = max(app.peak[qn], len(q))
        return True

    def _lifecycle(self, app: MApp, ev: Event) -> None:
        if app.lost:
            app.lost += 1
        elif len(app.lifecycle) >= self.cap:
            app.lost = len(app.lifecycle) + 1
            app.lifecycle.clear()
        else:
            app.lifecycle.append(ev)

    def _discard_key(self, app_name: str, key_id: int, *, keep: int | None = None) -> None:
        app = self.apps[app_name]
        for qn, q in enumerate(app.queues):
            if qn == keep:
                continue
            for e in [e for e in q if e[0] == key_id]:
                q.remove(e)
                self._discarded(app_name, app, e)

    def _discarded(self, app_name: str, app: MApp, e: list[object]) -> None:
        key_id, qn = e[0], e[4]
        self._count(app, key_id, qn, 2)  # type: ignore[arg-type]
        sub = self.subs.get(key_id, {}).get(app_name)  # type: ignore[call-overload]
        if sub is not None and e[3] is not None:
            sub.owes = True

    def open_stream(self, name: str, cfgs: tuple[QueueConfig, ...]) -> bool:
        mins = [c.min_length for c in cfgs]
        maxs = [c.max_length for c in cfgs]
        old = self.apps.get(name)
        returned = 0
        if old:
            returned = sum(old.mins) + sum(
                max(0, len(q) - m) for q, m in zip(old.queues, old.mins, strict=True)
            )
        if sum(mins) > self.free() + returned:
            return False
        if old:
            for q in old.queues:
                for e in q:
                    self._discarded(name, old, e)
                q.clear()
            if old.lifecycle:
                old.lost += len(old.lifecycle)
                old.lifecycle.clear()
            old.credits = list(self.weights)
            old.mins, old.maxs = mins, maxs
            old.peak = [0, 0, 0]
        else:
            self.apps[name] = MApp(mins, maxs, credits=list(self.weights))
        return True

    def register(
        self, app_name: str, name: str, queue: int, trigger: Trigger, want: bool
    ) -> tuple[Status, int, bytes | None]:
        key = self.keys.get(name)
        if key is None:
            return Status.NOT_FOUND, 0, None
        if not 0 <= queue <= 2:
            return Status.INVALID_ARGUMENT, key.id, None
        subs = self.subs.setdefault(key.id, {})
        if app_name in subs:
            if subs[app_name].queue != queue:
                self._discard_key(app_name, key.id, keep=queue)
            subs[app_name].queue = queue
            subs[app_name].trigger = trigger
        else:
            subs[app_name] = MSub(queue, trigger, name)
        return Status.OK, key.id, (key.value if want else None)

    def deregister(self, app_name: str, name: str) -> tuple[Status, int]:
        key = self.keys.get(name)
        if key is None:
            return Status.NOT_FOUND, 0
        subs = self.subs.get(key.id, {})
        if app_name in subs and app_name in self.apps:
            del subs[app_name]
            if not subs:
                del self.subs[key.id]
            self._discard_key(app_name, key.id)
        return Status.OK, key.id

    def remove_app(self, name: str) -> None:
        app = self.apps.pop(name, None)
        for key_id in list(self.subs):
            self.subs[key_id].pop(name, None)
            if not self.subs[key_id]:
                del self.subs[key_id]
        del app

    def drain(self, name: str, room: int) -> list[Event]:
        app = self.apps[name]
        out: list[Event] = []
        if app.lost:
            out.append(ResyncRequired(app.lost))
            app.lost = 0
            room -= 1
        while room > 0 and app.lifecycle:
            out.append(app.lifecycle.pop(0))
            room -= 1
        taken: list[list[list[object]]] = [[], [], []]
        avail = [list(q) for q in app.queues]
        while room > 0:
            pick = next((q for q in range(3) if avail[q] and app.credits[q]), None)
            if pick is None:
                if not any(avail):
                    break
                app.credits = list(self.weights)
                continue
            taken[pick].append(avail[pick].pop(0))
            app.credits[pick] -= 1
            room -= 1
        for qn in range(3):
            app.totals[qn][0] += len(taken[qn])
            for e in taken[qn]:
                app.queues[qn].remove(e)
                k, s, _t, d, q = e
                out.append(DataUpdated(k, s, -1, d, q))  # type: ignore[arg-type]
        return out

    def pending(self, name: str) -> int:
        app = self.apps.get(name)
        if app is None:
            return 0
        return len(app.lifecycle) + (1 if app.lost else 0) + sum(len(q) for q in app.queues)

    def queue_stats(self, name: str) -> list[tuple[int, ...]] | None:
        """Per queue: depth, peak, delivered, evicted, lost, discarded."""
        app = self.apps.get(name)
        if app is None:
            return None
        return [(len(app.queues[qn]), app.peak[qn], *app.totals[qn]) for qn in range(3)]

    def drop_counts(self, name: str) -> dict[tuple[int, int], tuple[int, int, int]]:
        app = self.apps.get(name)
        return {k: (v[0], v[1], v[2]) for k, v in app.drops.items()} if app else {}
