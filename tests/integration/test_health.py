"""Signal and provider health against a real server: KeyStale/KeyFresh for a watched
key with an expected period, ProviderGone/ProviderBack when a claiming provider
goes and comes back, Get's ``no_provider``, and the journal's records of it.

Timing: the server looks for stale keys every ``TICK_S`` (0.2 s); a KeyStale
must arrive within the period plus one tick plus ``DELIVERY`` (the loop and
loopback gRPC on a loaded machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from vehicle_middleware.contract.values import encode
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.sdk import (
    AppClient,
    ClientEvent,
    DataEvent,
    KeyFreshEvent,
    KeyStaleEvent,
    ProviderBackEvent,
    ProviderClient,
    ProviderGoneEvent,
    QueueSpec,
    Sub,
)
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.health import TICK_S
from vehicle_middleware.server.journal import read_journal
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually, fails
from tests.integration.conftest import TEST_SETTINGS, serving, start_ready

PERIOD = 0.5
DELIVERY = 0.4
HEALTHY = "Vehicle.Health.Watched"
UNWATCHED = "Vehicle.Health.Unwatched"
NOT_EXPECTED = "Vehicle.Other.Level"
HEALTH_KINDS = ("key_stale", "key_fresh", "provider_gone", "provider_back")


def watching(tmp_path: Path) -> Settings:
    """A server that expects ``Vehicle.Health.**`` every :data:`PERIOD` and journals
    the lifecycle under ``tmp_path``."""
    return replace_settings(
        TEST_SETTINGS,
        expect=(f"Vehicle.Health={PERIOD}",),
        journal_dir=str(tmp_path / "journal"),
        journal_level="lifecycle",
    )


class Reader:
    """An app reading its events in the background, each with its arrival time."""

    def __init__(self, client: AppClient) -> None:
        self.client = client
        self.events: list[tuple[float, ClientEvent]] = []
        self.paused = asyncio.Event()
        self.paused.set()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for batch in self.client.batches():
            await self.paused.wait()
            now = time.time()
            self.events.extend((now, e) for e in batch)

    def of(self, kind: type[Any]) -> list[tuple[float, Any]]:
        return [(t, e) for t, e in self.events if isinstance(e, kind)]

    def health(self) -> list[ClientEvent]:
        return [e for _, e in self.events if not isinstance(e, DataEvent)]

    async def wait_for(self, kind: type[Any], count: int = 1, timeout: float = 10.0) -> Any:
        """The ``count``-th event of ``kind`` (with its arrival time), waiting for it."""
        await eventually(
            lambda: len(self.of(kind)) >= count, timeout=timeout, what=f"{kind.__name__} #{count}"
        )
        return self.of(kind)[count - 1]

    async def close(self) -> None:
        await self.client.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def app(address: str, name: str, *keys: str, **kw: Any) -> Reader:
    client = AppClient(address, name, **kw)
    await client.connect()
    results = await client.subscribe([Sub(k, on_update=True) for k in keys])
    assert all(r.ok for r in results), results
    return Reader(client)


async def writing(provider: ProviderClient, key: str, stop: asyncio.Event) -> None:
    """Write ``key`` every 50 ms until ``stop``."""
    while not stop.is_set():
        await provider.publish({key: b"v"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)
    await provider.flush()


def journal_health(tmp_path: Path) -> list[dict[str, Any]]:
    return [r for r in read_journal([tmp_path / "journal"]) if r["kind"] in HEALTH_KINDS]


async def get(server: RunningServer, *names: str) -> dict[str, vstore_pb2.Value]:
    async with ProviderClient(server.address, "reader") as reader:
        return await reader.get(list(names))


# -- stale and fresh --------------------------------------------------------------


async def test_a_watched_key_that_stops_being_written_is_stale_then_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(watching(tmp_path)) as server:
        provider = ProviderClient(server.address, "sensor")
        await provider.add_keys([HEALTHY, UNWATCHED, NOT_EXPECTED])
        watcher = await app(server.address, "watcher", HEALTHY, NOT_EXPECTED)
        bystander = await app(server.address, "bystander", NOT_EXPECTED)
        try:
            # Only the watched key with an expectation is followed: the unwatched
            # one and the one without an expectation cost nothing.
            ess = server.runtime.ess
            assert ess.followed_keys() == [provider.ids[HEALTHY]]
            stop = asyncio.Event()
            await writing(provider, HEALTHY, _after(stop, 0.6))
            await provider.publish({NOT_EXPECTED: b"x"})  # silent from here on: no expectation
            await provider.flush()
            last = (await get(server, HEALTHY))[HEALTHY].time_ns
            arrived, stale = await watcher.wait_for(KeyStaleEvent)
            assert stale == KeyStaleEvent(provider.ids[HEALTHY], HEALTHY, last, int(PERIOD * 1e9))
            silent = arrived - last / 1e9
            assert PERIOD < silent <= PERIOD + TICK_S + DELIVERY, silent

            resumed = time.time()
            again = asyncio.create_task(writing(provider, HEALTHY, resume := asyncio.Event()))
            arrived, fresh = await watcher.wait_for(KeyFreshEvent)
            assert fresh.key == provider.ids[HEALTHY]
            assert fresh.name == HEALTHY
            assert resumed <= fresh.write_ns / 1e9 <= arrived
            assert arrived - resumed <= TICK_S + DELIVERY  # up to one tick late
            # While it is written, nothing else comes: two more looks tell nothing.
            health = server.runtime.health
            looks: list[list[Any]] = []

            def look(now_ns: int | None = None) -> list[Any]:
                notices = tick(now_ns)
                looks.append(notices)
                return notices

            tick = health.tick
            monkeypatch.setattr(health, "tick", look)
            await eventually(lambda: len(looks) >= 2, timeout=10, what="two health ticks")
            assert looks[:2] == [[], []]
            resume.set()
            await again
            assert [type(e) for e in watcher.health()] == [KeyStaleEvent, KeyFreshEvent]
            assert bystander.health() == []
        finally:
            await watcher.close()
            await bystander.close()
            await provider.close()
    records = journal_health(tmp_path)[:2]  # (stale again if the test ran slow to its end)
    assert [(r["kind"], r["key"], r["apps"]) for r in records] == [
        ("key_stale", HEALTHY, ["watcher"]),
        ("key_fresh", HEALTHY, ["watcher"]),
    ]
    assert records[0]["write_time_ns"] == stale.last_write_ns
    assert records[0]["period_ns"] == int(PERIOD * 1e9)
    assert records[1]["write_time_ns"] == fresh.write_ns


async def test_health_events_survive_a_full_data_queue(tmp_path: Path) -> None:
    async with serving(watching(tmp_path), batch_max=5) as server:
        provider = ProviderClient(server.address, "sensor")
        await provider.add_keys([HEALTHY, NOT_EXPECTED])
        await provider.publish({HEALTHY: b"once"})
        slow = await app(
            server.address,
            "slow",
            HEALTHY,
            NOT_EXPECTED,
            queues=[QueueSpec(0, 1, 2)],
            window=1,
        )
        try:
            slow.paused.clear()  # the app stops reading: its queue fills
            for i in range(300):
                await provider.publish({NOT_EXPECTED: i.to_bytes(2, "big")})
            await provider.flush()
            server_ess = server.runtime.ess
            assert server_ess.overflowed("slow") > 0  # the drop rule acts on the data
            await eventually(lambda: server_ess.stale_keys() != [], what="the key to go stale")
            slow.paused.set()
            _, stale = await slow.wait_for(KeyStaleEvent)
            assert stale.key == provider.ids[HEALTHY]
            missed = sum(e.missed for _, e in slow.of(DataEvent))
            assert missed > 0
        finally:
            await slow.close()
            await provider.close()


async def test_a_stale_key_is_told_to_an_app_that_subscribes_later(tmp_path: Path) -> None:
    async with serving(watching(tmp_path)) as server:
        provider = ProviderClient(server.address, "sensor")
        await provider.add_keys([HEALTHY])
        await provider.publish({HEALTHY: b"once"})
        await provider.flush()
        first = await app(server.address, "first", HEALTHY)
        try:
            await first.wait_for(KeyStaleEvent)
            late = await app(server.address, "late", HEALTHY)
            try:
                _, stale = await late.wait_for(KeyStaleEvent, timeout=TICK_S + DELIVERY + 1)
                assert stale.name == HEALTHY
            finally:
                await late.close()
        finally:
            await first.close()
            await provider.close()
    kinds = [(r["kind"], r["apps"], r["transition"]) for r in journal_health(tmp_path)]
    assert kinds == [("key_stale", ["first"], True), ("key_stale", ["late"], False)]


# -- providers --------------------------------------------------------------------

PROVIDER = textwrap.dedent("""
    import asyncio, sys
    from vehicle_middleware.sdk import ProviderClient

    async def main():
        provider = ProviderClient(sys.argv[1], "claimer")
        await provider.add_keys(sys.argv[2:], claim=True)
        # No flush(): it ends the Publish stream, and the claims with it.
        await provider.publish({k: b"v" for k in sys.argv[2:]})
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")
CLAIMED = ["Vehicle.Claimed.A", "Vehicle.Claimed.B"]
FREE = "Vehicle.Free.C"


async def start_provider(address: str) -> asyncio.subprocess.Process:
    return await start_ready(PROVIDER, address, *CLAIMED)


async def test_apps_hear_a_killed_provider_went_away_and_came_back(tmp_path: Path) -> None:
    async with serving(watching(tmp_path)) as server:
        other = ProviderClient(server.address, "other")
        await other.add_keys([FREE])
        proc = await start_provider(server.address)
        try:
            ids = {n: server.runtime.store.id_of(n) for n in CLAIMED}
            subscriber = await app(server.address, "subscriber", CLAIMED[0], FREE)
            bystander = await app(server.address, "bystander", FREE)
            assert not (await get(server, *CLAIMED))[CLAIMED[0]].no_provider
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            _, gone = await subscriber.wait_for(ProviderGoneEvent)
            assert gone == ProviderGoneEvent("claimer", (ids[CLAIMED[0]],), (CLAIMED[0],))
            values = await get(server, *CLAIMED, FREE)
            assert values[CLAIMED[0]].no_provider
            assert values[CLAIMED[1]].no_provider  # nobody subscribes: still said by Get
            assert not values[FREE].no_provider  # never claimed: nothing to say
            late = AppClient(server.address, "late")
            await late.connect()
            [result] = await late.subscribe([Sub(CLAIMED[1])])
            assert result.ok
            assert result.no_provider
            await late.close()

            proc = await start_provider(server.address)
            _, back = await subscriber.wait_for(ProviderBackEvent)
            assert back == ProviderBackEvent("claimer", (ids[CLAIMED[0]],), (CLAIMED[0],))
            assert not (await get(server, CLAIMED[0]))[CLAIMED[0]].no_provider
            assert bystander.health() == []
            assert [type(e) for e in subscriber.health()] == [ProviderGoneEvent, ProviderBackEvent]
            await subscriber.close()
            await bystander.close()
            await eventually(
                lambda: not server.runtime.ess.has_stream("subscriber"),
                what="the subscriber's stream to end in the middleware",
            )
            proc.kill()  # again, after the apps left
            await proc.wait()
            await eventually(
                lambda: server.runtime.claims.claimed_by(CLAIMED[0]) is None,
                what="the killed provider's claims to end",
            )
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await other.close()
    records = journal_health(tmp_path)
    assert [(r["kind"], r["app"], r["keys"], r["apps"]) for r in records] == [
        ("provider_gone", "claimer", CLAIMED, ["subscriber"]),
        ("provider_back", "claimer", CLAIMED, ["subscriber"]),
        ("provider_gone", "claimer", CLAIMED, []),  # killed again, after the apps left
    ]


async def test_a_provider_that_closes_is_gone_and_another_may_take_over(
    tmp_path: Path,
) -> None:
    # The grace a flush gets is long here: close() must not wait for it.
    async with serving(watching(tmp_path), claim_grace_s=30.0) as server:
        first = ProviderClient(server.address, "first-provider")
        await first.add_keys(CLAIMED, claim=True)
        subscriber = await app(server.address, "subscriber", *CLAIMED)
        ids = tuple(sorted(first.ids[n] for n in CLAIMED))
        try:
            await first.close()
            _, gone = await subscriber.wait_for(ProviderGoneEvent, timeout=5.0)
            assert (gone.provider, gone.keys) == ("first-provider", ids)
            second = ProviderClient(server.address, "second-provider")
            await second.add_keys(CLAIMED, claim=True)
            _, back = await subscriber.wait_for(ProviderBackEvent)
            assert (back.provider, back.keys) == ("second-provider", ids)
            await second.close()
            await subscriber.wait_for(ProviderGoneEvent, 2)
        finally:
            await subscriber.close()


async def test_a_provider_that_flushes_and_writes_on_keeps_its_claims(tmp_path: Path) -> None:
    """flush() ends the Publish stream (to get its summary); the next write opens
    another within the grace: the apps hear nothing, nobody else may take the keys."""
    async with serving(watching(tmp_path), claim_grace_s=1.0) as server:
        provider = ProviderClient(server.address, "flusher")
        await provider.add_keys(CLAIMED, claim=True)
        subscriber = await app(server.address, "subscriber", *CLAIMED)
        other = ProviderClient(server.address, "other-provider")
        try:
            for i in range(3):
                await provider.publish({CLAIMED[0]: bytes([i])})
                await provider.flush()
            await provider.publish({CLAIMED[0]: b"after"})
            store = server.runtime.store
            await eventually(
                lambda: store.get(CLAIMED[0]).data == b"after",
                timeout=10,
                what="the write after the flushes stored (its Publish stream open)",
            )
            # The behaviour tested, not synchronisation: past the grace, nothing the
            # flushes could have left pending releases the claims.
            await asyncio.sleep(1.5)
            assert subscriber.health() == []
            assert server.runtime.claims.claimed_by(CLAIMED[0]) == "flusher"
            await fails(other.add_keys(CLAIMED[:1], claim=True), grpc.StatusCode.PERMISSION_DENIED)
        finally:
            await subscriber.close()
            await provider.close()
            await other.close()


async def test_a_kuksa_subscription_ignores_health_events(tmp_path: Path) -> None:
    async with serving(watching(tmp_path)) as server:
        provider = ProviderClient(server.address, "sensor")
        await provider.add_keys([HEALTHY])
        await provider.publish({HEALTHY: encode(1.0)})
        await provider.flush()
        async with grpc.aio.insecure_channel(server.address) as channel:
            call = v2_grpc.VALStub(channel).Subscribe(v2.SubscribeRequest(signal_paths=[HEALTHY]))
            first = await asyncio.wait_for(call.read(), 5)
            assert first.entries[HEALTHY].value.double == 1.0
            ess = server.runtime.ess
            await eventually(lambda: ess.stale_keys() != [], what="the key to go stale")
            await provider.publish({HEALTHY: encode(2.0)})
            await provider.flush()
            await eventually(lambda: ess.stale_keys() == [], what="the key to be fresh")
            update = await asyncio.wait_for(call.read(), 5)  # KeyStale and KeyFresh skipped
            assert update.entries[HEALTHY].value.double == 2.0
            call.cancel()
        await provider.close()
    [stale, fresh] = journal_health(tmp_path)[:2]
    assert (stale["kind"], fresh["kind"]) == ("key_stale", "key_fresh")
    assert "/kuksa-sub-" in stale["apps"][0]


def _after(event: asyncio.Event, seconds: float) -> asyncio.Event:
    asyncio.get_running_loop().call_later(seconds, event.set)
    return event


@pytest.mark.parametrize("rule", ["Vehicle.Cabin", "Vehicle=soon"])
def test_a_bad_expect_setting_is_refused_naming_the_rule(rule: str) -> None:
    with pytest.raises(ValueError, match="expect rule"):
        replace_settings(TEST_SETTINGS, expect=(rule,))
