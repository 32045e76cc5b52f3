"""The providers' loops against a running middleware, over the provider SDK.

Both add their keys, then publish until told to stop; the SDK reconnects
after a middleware restart, adds the keys again (ids may change) and
re-sends the latest values, and the loop resumes where the clock is (a
simulation does not burst to catch up; a replay goes on with the next
sample). Counters are kept in :class:`ProviderStatus` for ``--status``.

The simulation follows its keys' demand (``ProviderClient.demand``) unless
told to ignore it: what nobody watches is not sampled, the rest no faster than
asked. A middleware that does not tell demand gets everything, as it asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import grpc
from vehicle_middleware.contract.values import Scalar, encode
from vehicle_middleware.providers.recording import Sample, group_by_time
from vehicle_middleware.providers.simulation import Simulation
from vehicle_middleware.sdk import ProviderClient

__all__ = ["ProviderStatus", "add_keys", "replay", "simulate"]

log = logging.getLogger(__name__)

MAX_BATCH: Final = 1000
"""Updates per Publish batch and names per AddKeys call (the middleware's default limit)."""
MIN_TICK: Final = 0.01
"""The simulation publishes at most every 10 ms: what is due meanwhile goes in one batch."""
MAX_DEMAND_STREAMS: Final = 2
"""Demand streams (of ``MAX_BATCH`` keys each) at most: with the Publish stream, within
the middleware's default of 4 provider streams per app."""
FIRST_DEMAND_S: Final = 2.0
"""How long the simulation waits for its keys' first demand before it publishes anyway."""


@dataclass(slots=True)
class ProviderStatus:
    provider: str
    state: str = "starting"
    """``starting``, ``publishing``, ``done`` (a replay's end) or ``stopped``."""
    keys: int = 0
    published: int = 0
    """Updates handed to the SDK (its re-sends after a reconnect are not counted)."""
    batches: int = 0
    reconnects: int = 0
    started_ns: int = field(default_factory=time.time_ns)
    extra: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        return asdict(self)


async def add_keys(
    client: ProviderClient, names: Sequence[str], status: ProviderStatus, *, claim: bool = False
) -> None:
    """Add ``names`` in batches the middleware accepts (``claim``: and claim them)."""
    for i in range(0, len(names), MAX_BATCH):
        await client.add_keys(names[i : i + MAX_BATCH], claim=claim)
    status.keys = len(client.ids)


async def _publish(
    client: ProviderClient, updates: Sequence[tuple[str, Scalar]], status: ProviderStatus
) -> None:
    for i in range(0, len(updates), MAX_BATCH):
        chunk = updates[i : i + MAX_BATCH]
        await client.publish([(name, encode(value)) for name, value in chunk])
        status.published += len(chunk)
        status.batches += 1
    status.reconnects = client.reconnects


async def simulate(
    client: ProviderClient,
    sim: Simulation,
    status: ProviderStatus,
    stop: asyncio.Event,
    *,
    duration: float | None = None,
    claim: bool = False,
    follow_demand: bool = True,
) -> None:
    """Publish the simulation's values on its schedule until ``stop`` (or ``duration`` s).

    ``claim``: claim the keys, so that nobody else may write them while this
    provider runs, and their subscribers hear when it goes (``ProviderGone``).
    ``follow_demand``: sample only what is watched, no faster than asked
    (False: every signal at its own rate, whoever watches).
    """
    await add_keys(client, sim.names, status, claim=claim)
    status.state = "publishing"
    log.info("publishing %d keys, about %.0f updates/s", len(sim.names), sim.rate)
    t0 = time.monotonic()
    # What it would publish ignoring the demand: every signal at its own rate.
    status.extra["own_rate"] = round(sim.rate, 1)
    status.extra["follows_demand"] = follow_demand
    woken = asyncio.Event()
    chunks = _chunks(sim.names)[:MAX_DEMAND_STREAMS] if follow_demand else []
    if len(sim.names) > MAX_DEMAND_STREAMS * MAX_BATCH and follow_demand:
        log.info(
            "following the demand of the first %d keys; the others at their own rates",
            MAX_DEMAND_STREAMS * MAX_BATCH,
        )
    # The car's initial state: one value of every key at start, whoever watches
    # (so every key has a value from the start, as a car's ECUs report theirs). The
    # rate figures leave it out: ``published_per_s`` counts what comes after.
    initial = sim.step(0.0)
    await _publish(client, initial, status)
    status.extra["initial_state"] = len(initial)
    told = [asyncio.Event() for _ in chunks]
    followers = [
        asyncio.create_task(_follow(client, sim, names, t0, woken, status, first))
        for names, first in zip(chunks, told, strict=True)
    ]
    try:
        if told:  # sample nothing nobody watches, from the start (a mute middleware: not long)
            firsts = [asyncio.ensure_future(first.wait()) for first in told]
            await asyncio.wait(firsts, timeout=FIRST_DEMAND_S)
            for f in firsts:
                f.cancel()
        while not stop.is_set():
            now = time.monotonic() - t0
            if duration is not None and now >= duration:
                break
            await _publish(client, sim.step(now), status)
            wake_at = max(sim.next_due(), now + MIN_TICK)
            if duration is not None:
                wake_at = min(wake_at, duration)  # nothing due (nobody watches): not forever
            wait = wake_at - (time.monotonic() - t0)
            if wait > 0:
                await _sleep(wait, stop, woken)
    finally:
        elapsed = time.monotonic() - t0
        if elapsed > 0:
            after = status.published - len(initial)
            status.extra["published_per_s"] = round(after / elapsed, 1)
        for task in followers:
            task.cancel()
        for task in followers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    status.state = "stopped"


def _chunks(names: Sequence[str]) -> list[list[str]]:
    return [list(names[i : i + MAX_BATCH]) for i in range(0, len(names), MAX_BATCH)]


async def _sleep(seconds: float, stop: asyncio.Event, woken: asyncio.Event) -> None:
    """Wait ``seconds``, or less if ``stop`` or ``woken`` is set (``woken`` is cleared)."""
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(woken.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    woken.clear()


async def _follow(
    client: ProviderClient,
    sim: Simulation,
    names: list[str],
    t0: float,
    woken: asyncio.Event,
    status: ProviderStatus,
    told: asyncio.Event,
) -> None:
    """Apply the demand of ``names`` to the simulation as the middleware tells it
    (``told``: set once the first demand was applied, or none will be)."""
    try:
        async for changed in client.demand(names):
            t = time.monotonic() - t0
            for name, demand in changed.items():
                sim.follow(name, watched=demand.watched, min_interval_s=demand.min_interval_s, t=t)
            status.extra["demanded_rate"] = round(sim.demanded_rate, 1)
            told.set()
            woken.set()  # a signal now watched may be due before the loop's wake-up
    except grpc.aio.AioRpcError as e:
        # E.g. more streams than the middleware allows this provider: those keys
        # are wanted, at their own rates, as without the hint.
        t = time.monotonic() - t0
        for name in names:
            sim.follow(name, watched=True, min_interval_s=0.0, t=t)
        told.set()
        woken.set()
        log.warning(
            "cannot follow the demand of %d keys (%s: %s); they are published at their rates",
            len(names),
            e.code().name,
            e.details(),
        )


async def replay(
    client: ProviderClient,
    samples: Sequence[Sample],
    status: ProviderStatus,
    stop: asyncio.Event,
    *,
    speed: float = 1.0,
    source_time: bool = False,
    claim: bool = False,
) -> None:
    """Publish the samples with their recorded spacing divided by ``speed``
    (0: as fast as the middleware takes them); samples of one time are one batch.

    With ``source_time`` each sample carries its recorded ``time_ns`` as the
    write's source time; otherwise the middleware stamps it on arrival.
    """
    names = list(dict.fromkeys(s.key for s in samples))
    await add_keys(client, names, status, claim=claim)
    status.state = "publishing"
    status.extra["samples"] = len(samples)
    log.info("replaying %d samples of %d keys at %sx", len(samples), len(names), speed or "max")
    if not samples:
        status.state = "done"
        return
    first = samples[0].time_ns
    t0 = time.monotonic()
    for group in group_by_time(samples):
        if stop.is_set():
            status.state = "stopped"
            return
        if speed > 0:
            wait = (group[0].time_ns - first) / 1e9 / speed - (time.monotonic() - t0)
            if wait > 0:
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                    status.state = "stopped"
                    return
                except TimeoutError:
                    pass
        for i in range(0, len(group), MAX_BATCH):
            chunk = group[i : i + MAX_BATCH]
            await client.publish(
                [(s.key, encode(s.value)) for s in chunk],
                time_ns=group[0].time_ns if source_time else None,
            )
            status.published += len(chunk)
            status.batches += 1
        status.reconnects = client.reconnects
    await client.flush()
    status.state = "done"
