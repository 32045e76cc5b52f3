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
    Filter,
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
    filter: Filter | None = None
    # The filter's state, reset when the filter changes.
    cur: bytes | None = None  # the key's value as last seen
    ref: float | None = None  # the number of the last event (threshold)
    inside: bool | None = None  # whether the last event was in the range
    sent: int | None = None  # when the last event went out
    held: list[object] | None = None  # [due, order, data, writes] of the held event
    since: int = 0  # writes selected since the last event that are in none
    since_data: bool = False


def number(data: bytes | None) -> float | None:
    """The test's numbers: ASCII decimals (b"12.5"); anything else is not one."""
    try:
        value = float(data.decode()) if data else None
    except (UnicodeDecodeError, ValueError):
        return None
    return value if value == value else None  # NaN is not a number here


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
        self.now = 0  # the filters' clock
        self.holds = 0  # how many holds began (the order of due events of one time)

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
            if sub.filter is not None:
                self._filtered(app_name, sub, key_id, data)
                continue
            self._send(app_name, sub, key_id, data, 1)

    def _send(self, app_name: str, sub: MSub, key_id: int, data: bytes | None, writes: int) -> None:
        sub.seq = sub.seq + 1 if sub.seq != MAX_SEQ else 1
        if data is None and sub.owes:
            data = sub.cur
        app = self.apps[app_name]
        if self._push(app, sub.queue, [key_id, sub.seq, 0, data, sub.queue, writes]):
            sub.owes = False
        elif data is not None:
            sub.owes = True

    def _filtered(self, app_name: str, sub: MSub, key_id: int, data: bytes | None) -> None:
        """The filter rules of docs/design.md, plainly."""
        f = sub.filter
        assert f is not None
        sub.since += 1
        if data is not None:
            sub.cur = data
            sub.since_data = True
        if f.numeric:
            n = number(sub.cur)
            if n is None:
                sub.ref = sub.inside = None
            else:
                by_threshold = f.threshold is not None and (
                    sub.ref is None or abs(n - sub.ref) >= f.threshold
                )
                inside = f.range[0] <= n <= f.range[1] if f.range is not None else None
                by_range = f.range is not None and (sub.inside is None or inside != sub.inside)
                if not (by_threshold or by_range):
                    return  # counted in the next event
                sub.ref, sub.inside = n, inside
        held = sub.held
        carries = sub.since_data or (held is not None and held[2] is not None)
        if f.min_interval_ns and sub.sent is not None and self.now - sub.sent < f.min_interval_ns:
            if held is None:
                self.holds += 1
                held = sub.held = [sub.sent + f.min_interval_ns, self.holds, None, 0]
            held[2] = sub.cur if carries else None
            held[3] += sub.since  # type: ignore[operator]
            sub.since, sub.since_data = 0, False
            return
        if f.min_interval_ns:
            sub.sent = self.now
        writes = sub.since + (held[3] if held is not None else 0)  # type: ignore[operator]
        sub.held, sub.since, sub.since_data = None, 0, False
        self._send(app_name, sub, key_id, sub.cur if carries else None, writes)

    def advance(self, ns: int) -> None:
        """Time passes; the held events due go out, earliest first."""
        self.now += ns
        due = sorted(
            (sub.held[0], sub.held[1], app, key, sub)  # type: ignore[index]
            for key, subs in self.subs.items()
            for app, sub in subs.items()
            if sub.held is not None and sub.held[0] <= self.now  # type: ignore[operator]
        )
        for _, _, app, key, sub in due:
            held = sub.held
            assert held is not None
            sub.held, sub.sent = None, self.now
            self._send(app, sub, key, held[2], held[3])  # type: ignore[arg-type]

    def held_writes(self, app: str, key_id: int) -> int:
        sub = self.subs.get(key_id, {}).get(app)
        if sub is None or sub.filter is None:
            return 0
        return sub.since + (sub.held[3] if sub.held is not None else 0)  # type: ignore[return-value]

    def set_filter(
        self, app_name: str, key_id: int, sub: MSub, f: Filter | None, current: bytes | None
    ) -> None:
        if f == sub.filter:
            return
        held = sub.held
        if held is not None:  # a held event goes out now, before the new filter applies
            sub.held = None
            self._send(app_name, sub, key_id, held[2], held[3])  # type: ignore[arg-type]
        sub.filter = f
        sub.cur, sub.ref, sub.inside, sub.sent, sub.held = current, None, None, None, None
        sub.since, sub.since_data = 0, False

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
        self,
        app_name: str,
        name: str,
        queue: int,
        trigger: Trigger,
        want: bool,
        f: Filter | None = None,
        numeric_names: frozenset[str] = frozenset(),
    ) -> tuple[Status, int, bytes | None]:
        key = self.keys.get(name)
        if key is None:
            return Status.NOT_FOUND, 0, None
        if not 0 <= queue <= 2:
            return Status.INVALID_ARGUMENT, key.id, None
        f = None if f is None or f.empty else f
        if f is not None and f.numeric and name not in numeric_names and number(key.value) is None:
            return Status.INVALID_ARGUMENT, key.id, None
        subs = self.subs.setdefault(key.id, {})
        if app_name in subs:
            if subs[app_name].queue != queue:
                self._discard_key(app_name, key.id, keep=queue)
            subs[app_name].queue = queue
            subs[app_name].trigger = trigger
        else:
            subs[app_name] = MSub(queue, trigger, name)
        self.set_filter(app_name, key.id, subs[app_name], f, key.value)
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
                k, s, _t, d, q, w = e
                out.append(DataUpdated(k, s, -1, d, q, w))  # type: ignore[arg-type]
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
