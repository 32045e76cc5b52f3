"""An in-process demonstration of the V-Store and the ESS (``make demo``).

A simulated provider writes a short drive: speed changing every tick, the cabin
temperature re-published unchanged as a heartbeat, a rear window stepping
down. Two apps subscribe: ``dashboard`` reads every tick, ``slow`` reads one
small batch now and then with short queues, so the drop rule has to act. At
the end it prints what each app received, the seq gaps it saw, and the drops
the ESS counted: every gap an app saw is explained by the ESS's own counts.

Everything runs in one thread with a simulated clock: it is deterministic and
takes well under a second. The gRPC middleware and the full demo come in later
issues.
"""

from __future__ import annotations

import argparse
import math
import struct
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from ess import (
    DataUpdated,
    Event,
    EventSubSystem,
    KeyAdded,
    QueueConfig,
    ResyncRequired,
    SubscriptionRequest,
    Trigger,
)
from vstore import VStore

SPEED = "Vehicle.Speed"
TEMP = "Vehicle.Cabin.HVAC.AmbientAirTemperature"
WINDOW = "Vehicle.Body.Windows.Row2.Right.Level"
TICK_NS = 10_000_000  # 10 ms of simulated time per tick


def _f32(x: float) -> bytes:
    return struct.pack("<f", x)


@dataclass
class AppView:
    """What one app observed, from the events alone."""

    name: str
    names: dict[int, str] = field(default_factory=dict)
    received: int = 0
    last_seq: dict[int, int] = field(default_factory=dict)
    missing: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    latest: dict[int, bytes] = field(default_factory=dict)
    resyncs: int = 0

    def take(self, events: list[Event]) -> None:
        for e in events:
            if isinstance(e, KeyAdded):
                self.names[e.key] = e.name
            elif isinstance(e, ResyncRequired):
                self.resyncs += 1
            elif isinstance(e, DataUpdated):
                self.received += 1
                prev = self.last_seq.get(e.key, 0)
                self.missing[e.key].update(range(prev + 1, e.seq))
                self.last_seq[e.key] = e.seq
                if e.data is not None:
                    self.latest[e.key] = e.data


@dataclass(frozen=True)
class AppFigures:
    """What one app received and lost, and whether the ESS's reports explain it."""

    received: int
    gaps: int
    dropped: int
    trailing: int
    explained: bool


def run(ticks: int, slow_every: int, out: list[str]) -> dict[str, AppFigures]:
    """Run the simulation; append report lines to ``out``; return the figures."""
    now = [0]
    store = VStore(clock=lambda: now[0])
    dropped: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))

    class Journal:  # the ESS's drop reports, as the telemetry journal will get them
        def event_dropped(self, app: str, key: int, queue: int, seq: int, reason: object) -> None:
            dropped[app][key].add(seq)

    ess = EventSubSystem(store, observer=Journal())
    store.set_listener(ess)
    # The apps open their streams first, so they also see the keys being added.
    ess.open_stream("dashboard")
    ess.open_stream("slow", [QueueConfig(0, 2, 4), QueueConfig(1, 2, 4)])
    views = {name: AppView(name) for name in ("dashboard", "slow")}

    speed, temp, window = store.add_keys([SPEED, TEMP, WINDOW])
    store.add_keys(
        [
            f"Vehicle.Chassis.Axle.Row{r}.Wheel.{side}.Speed"
            for r in (1, 2)
            for side in ("Left", "Right")
        ]
    )
    wanted = [
        SubscriptionRequest(SPEED, 0, Trigger.ON_CHANGE),
        SubscriptionRequest(TEMP, 1, Trigger.ON_UPDATE),
        SubscriptionRequest(WINDOW, 0, Trigger.ON_CHANGE),
    ]
    for app in views:
        ess.register(app, wanted)

    published = 0
    for tick in range(ticks):
        now[0] = tick * TICK_NS
        v = max(0.0, 50 + 30 * math.sin(tick / 40))
        store.set(speed, _f32(round(v, 1)))
        published += 1
        if tick % 10 == 0:  # heartbeat: same bytes every 100 ms
            store.set(temp, _f32(21.5))
            published += 1
        if tick % 25 == 0:
            store.set(window, bytes([max(0, 100 - tick // 25 * 10)]))
            published += 1
        for wheel in range(4):  # published, but nobody watches: one bit test each
            store.set(
                f"Vehicle.Chassis.Axle.Row{1 + wheel // 2}.Wheel."
                f"{'Left' if wheel % 2 == 0 else 'Right'}.Speed",
                _f32(v),
            )
            published += 1
        views["dashboard"].take(ess.drain("dashboard", 100))
        if tick % slow_every == slow_every - 1:
            views["slow"].take(ess.drain("slow", 3))
    for name, view in views.items():
        view.take(ess.drain(name, 1000))
        ess.check()

    out.append(
        f"published {published} values to {len(store)} keys over "
        f"{ticks * TICK_NS / 1e9:.1f} s of simulated time; "
        f"{len(ess.watched_keys())} keys watched"
    )
    figures: dict[str, AppFigures] = {}
    for name, view in views.items():
        counted = sum(c.evicted + c.lost for c in ess.drop_counts(name).values())
        seen = sum(len(s) for s in view.missing.values())
        # Losses after an app's last event of a key show as a gap only when a
        # later event of that key arrives: count them apart.
        trailing = sum(
            len({s for s in seqs if s > view.last_seq.get(k, 0)})
            for k, seqs in dropped[name].items()
        )
        explained = all(
            view.missing[k] == {s for s in dropped[name][k] if s < view.last_seq.get(k, 0)}
            for k in set(view.missing) | set(dropped[name])
        )
        figures[name] = AppFigures(view.received, seen, counted, trailing, explained)
        out.append(
            f"  {name:9s} received {view.received:5d} events; seq gaps seen {seen:4d}, "
            f"drops reported {counted:4d} ({trailing} after its last event of a key); "
            f"{'every gap explained' if explained else 'UNEXPLAINED GAPS'}"
        )
        for key_id, value in sorted(view.latest.items()):
            state = (
                "up to date"
                if value == store.peek(key_id)[0]
                else "behind: its last change was lost and nothing newer was written"
            )
            out.append(f"      {view.names.get(key_id, str(key_id)):40s} {state}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="In-process V-Store + ESS demonstration.")
    parser.add_argument("--ticks", type=int, default=2000, help="simulated 10 ms ticks")
    parser.add_argument(
        "--slow-every", type=int, default=20, help="the slow app reads one batch of 3 every N ticks"
    )
    args = parser.parse_args(argv)
    lines: list[str] = []
    figures = run(args.ticks, args.slow_every, lines)
    print("\n".join(lines))
    slow = figures["slow"]
    dash = figures["dashboard"]
    ok = dash.dropped == dash.gaps == 0 and slow.dropped > 0 and slow.explained and dash.explained
    print(
        "demo OK: the fast app lost nothing; the slow app's losses are all accounted for"
        if ok
        else "demo FAILED: see above"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
