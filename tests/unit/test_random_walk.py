"""Seeded random walks through the same machine as the Hypothesis test.

Hypothesis shrinks failures beautifully but, with its preference for simple
inputs, rarely builds the long back-pressure scenarios (full queues, several
queues, re-registration across queues) where the subtle rules live. These
plain seeded walks reach them in every run, deterministically, and compare the
real cores with the model and the value property after every step.
"""

from __future__ import annotations

import random

import pytest
from vehicle_middleware.ess import QueueConfig, Trigger

from tests.unit.test_state_machine import APPS, NAMES, VALUES, CoreMachine


def _cfgs(rng: random.Random) -> list[QueueConfig]:
    return [QueueConfig(q, rng.randint(0, 1), rng.randint(1, 4)) for q in range(3)]


@pytest.mark.parametrize("seed", range(12))
def test_seeded_random_walk_agrees_with_the_model(seed: int) -> None:
    rng = random.Random(seed)
    evictions = multi_queue_batches = 0
    for _ in range(50):
        m = CoreMachine()
        m.start(
            [_cfgs(rng) for _ in APPS],
            [
                (rng.choice(APPS), rng.choice(NAMES), rng.randint(0, 2), rng.choice(list(Trigger)))
                for _ in range(6)
            ],
        )
        for _ in range(40):
            op = rng.random()
            app = rng.choice(APPS)
            if op < 0.3:
                writes = [
                    (rng.choice(NAMES), rng.choice(VALUES)) for _ in range(rng.randint(1, 10))
                ]
                m.traffic(writes, None)
            elif op < 0.55:
                got = m.drain_and_compare(app, rng.randint(1, 6))
                multi_queue_batches += len({getattr(e, "queue", None) for e in got} - {None}) > 1
            elif op < 0.8:  # often onto another queue: the subtle case
                m.register(
                    app,
                    rng.choice(NAMES),
                    rng.randint(0, 3),
                    rng.choice(list(Trigger)),
                    rng.random() < 0.3,
                )
            elif op < 0.85:
                m.deregister(app, rng.choice(NAMES))
            elif op < 0.9:
                m.toggle_key(rng.choice(NAMES))
            elif op < 0.95:
                m.reopen_stream(app, _cfgs(rng))
            else:
                m.remove_app(app)
                m.open_missing_stream(app, _cfgs(rng))
            m.agree()
            m.an_app_that_got_the_last_event_knows_the_latest_value()
        evictions += sum(c.evicted for a in APPS for c in m.ess.drop_counts(a).values())
    # The walk must actually reach the interesting states.
    assert evictions > 50
    assert multi_queue_batches > 5
