"""Several middleware nodes as real processes on loopback ports.

Each test starts its nodes with ``python -m vehicle_middleware.server serve --node-id ...
--peer ...`` (bench.nodes), bounded in time and always stopped; partitions
are real TCP relays (bench.relay) cut and healed, a killed node is SIGKILLed,
a node that stops reading is SIGSTOPped. What they check is what an
integrator relies on: apps on every node see every node's writes, in order
per key, with their original time; nodes end equal after partitions,
restarts and conflicts; two guarded writes against one head never both
apply; what a peer may not say changes nothing and is journaled; a peer that
stops reading stalls nobody.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.replica import Event, Kind, Outgoing, Write, make_event
from vehicle_middleware.sdk import AppClient, ProviderClient, QueueSpec, Sub
from vehicle_middleware.sdk.events import DataEvent
from vehicle_middleware.server.cluster.convert import EventBytes

from bench.nodes import Node, Nodes, free_port, status
from bench.relay import Relay
from tests.conftest import eventually, eventually_async

SYNC = 0.5
FAST = ("--sync-interval-s", str(SYNC), "--send-unread-interval-s", "0.2")
MD = (("app-id", "cluster-test"),)


async def digests(nodes: Nodes) -> set[str]:
    return {(await status(n.address)).digest for n in nodes}


async def converged(nodes: Nodes, timeout: float = 10.0) -> None:
    """Every node has the same digest (and head) within ``timeout`` seconds."""
    states: list[Any] = []

    async def same() -> bool:
        states[:] = [await status(n.address) for n in nodes]
        return len({s.digest for s in states}) == 1 and len({s.head for s in states}) == 1

    await eventually_async(
        same,
        timeout=timeout,
        what=lambda _: (
            "nodes did not converge: "
            + ", ".join(f"{s.node_id} {s.digest[:8]} head {s.head[:8]}" for s in states)
        ),
    )


async def linked(nodes: Nodes, timeout: float = 10.0) -> None:
    """Every node's link to every other is up."""

    async def up() -> bool:
        states = [await status(n.address) for n in nodes]
        return all(p.link == "up" for st in states for p in st.peers)

    await eventually_async(up, timeout=timeout, what="links did not come up")


async def get(address: str, names: list[str]) -> vstore_pb2.GetResponse:
    async with grpc.aio.insecure_channel(address) as channel:
        reply: vstore_pb2.GetResponse = await vstore_pb2_grpc.VStoreStub(channel).Get(
            vstore_pb2.GetRequest(names=names), metadata=MD, timeout=10
        )
        return reply


async def set_value(
    address: str, name: str, data: bytes, if_head: str | None = None
) -> vstore_pb2.SetResponse:
    async with grpc.aio.insecure_channel(address) as channel:
        request = vstore_pb2.SetRequest(updates=[vstore_pb2.Update(name=name, data=data)])
        if if_head is not None:
            request.if_head = if_head
        reply: vstore_pb2.SetResponse = await vstore_pb2_grpc.VStoreStub(channel).Set(
            request, metadata=MD, timeout=15
        )
        return reply


async def add_keys(address: str, names: list[str]) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        await vstore_pb2_grpc.VStoreStub(channel).AddKeys(
            vstore_pb2.AddKeysRequest(names=names), metadata=MD, timeout=10
        )


async def wait_keys(address: str, names: list[str], timeout: float = 10.0) -> None:
    async def present() -> bool:
        return not (await get(address, names)).not_found

    await eventually_async(present, timeout=timeout, what=f"keys did not reach {address}")


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """Three nodes a, b, c for the tests that do not kill or stop one."""
    with Nodes(["a", "b", "c"], tmp_path_factory.mktemp("three"), *FAST) as nodes:
        yield nodes


# -- replication ---------------------------------------------------------------------------


async def test_an_app_on_c_receives_every_write_of_a_provider_on_a_in_order(three: Nodes) -> None:
    keys = [f"Vehicle.Zone.K{i}" for i in range(100)]
    provider = ProviderClient(three["a"].address, "zone-provider")
    app = AppClient(three["c"].address, "far-app", queues=[QueueSpec(0, 10, 200)])
    try:
        await provider.add_keys(keys)
        await wait_keys(three["c"].address, keys)  # key_added reached c (names travel)
        await app.connect()
        results = await app.subscribe([Sub(k, on_update=True) for k in keys])
        assert all(r.ok for r in results)
        got: dict[str, list[tuple[int, bytes | None, int]]] = defaultdict(list)
        received = 0

        async def read() -> None:
            nonlocal received
            async for batch in app.batches():
                for e in batch:
                    if isinstance(e, DataEvent):
                        assert e.name is not None
                        got[e.name].append((e.seq, e.data, e.time_ns))
                        received += 1

        reader = asyncio.create_task(read())
        base = time.time_ns() - 10**9
        sent = 0
        for round_ in range(100):  # 100 rounds x 100 keys = 10,000 updates
            batch = {k: round_.to_bytes(4, "big") for k in keys}
            await provider.publish(batch, time_ns=base + round_)  # the original write time
            sent += len(batch)
            # Paced so that the app's queue (200) never has to drop: each update must arrive.
            await eventually(lambda s=sent: received >= s - 100, timeout=20, what="the app")
        await eventually(lambda: received == 10_000, timeout=20, what="all 10,000 updates")
        reader.cancel()
    finally:
        await app.close()
        await provider.close()
    for k in keys:
        seqs = [s for s, _, _ in got[k]]
        assert seqs == list(range(1, 101)), k  # no gap: every write of the key, once
        assert [d for _, d, _ in got[k]] == [r.to_bytes(4, "big") for r in range(100)], k
        assert [t for _, _, t in got[k]] == [base + r for r in range(100)], k
    await converged(three)


async def test_concurrent_writes_of_one_key_on_two_nodes_end_equal_everywhere(
    three: Nodes,
) -> None:
    name = "Vehicle.Race.Plain"
    await add_keys(three["b"].address, [name])
    for node in three:
        await wait_keys(node.address, [name])
    for attempt in range(5):
        await asyncio.gather(
            set_value(three["a"].address, name, f"a{attempt}".encode()),
            set_value(three["c"].address, name, f"c{attempt}".encode()),
        )
    await converged(three)
    values = [(await get(n.address, [name])).values[0] for n in three]
    assert len({(v.data, v.version, v.time_ns) for v in values}) == 1
    assert values[0].data in {b"a4", b"c4"}


async def test_two_guarded_writes_against_one_head_exactly_one_applies_everywhere(
    three: Nodes,
) -> None:
    name = "Vehicle.Race.Guarded"
    await add_keys(three["b"].address, [name])
    await wait_keys(three["b"].address, [name])
    await set_value(three["b"].address, name, b"free")
    await converged(three)
    head = (await get(three["a"].address, [name])).head
    assert head == (await get(three["c"].address, [name])).head != ""
    on_a, on_c = await asyncio.gather(
        set_value(three["a"].address, name, b"taken-by-a", if_head=head),
        set_value(three["c"].address, name, b"taken-by-c", if_head=head),
    )
    outcomes = [r.results[0].head_conflict for r in (on_a, on_c)]
    assert sorted(outcomes) == [False, True], (on_a, on_c)
    winner, loser = (on_a, on_c) if not outcomes[0] else (on_c, on_a)
    won_value = b"taken-by-a" if winner is on_a else b"taken-by-c"
    assert loser.results[0].head != head  # refused with the newest head ...
    assert loser.results[0].head == loser.head == winner.head  # ... which is the winner's
    await converged(three)
    for node in three:
        value = (await get(node.address, [name])).values[0]
        assert (value.data, value.version) == (won_value, 2)
    # A guarded write on a stale head is refused at once, with the head to retry from.
    stale = await set_value(three["b"].address, name, b"late", if_head=head)
    assert stale.results[0].head_conflict
    assert stale.results[0].head == (await get(three["b"].address, [name])).head
    retried = await set_value(three["b"].address, name, b"late", if_head=stale.results[0].head)
    assert not retried.results[0].head_conflict


async def test_cluster_status_shows_links_and_equal_digests(three: Nodes) -> None:
    await converged(three)
    proc = await asyncio.create_subprocess_exec(
        *(
            [
                sys.executable,
                "-m",
                "vehicle_middleware.tools",
                "cluster-status",
                "--target",
                three["b"].address,
            ]
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err
    text = out.decode()
    digest = (await status(three["a"].address)).digest
    assert f"digest {digest[:12]}" in text
    assert text.count(" up ") == 2  # b's links to a and c
    assert "a " in text
    assert "c " in text


# -- partitions and restarts -----------------------------------------------------------------


async def test_a_killed_node_restarts_and_catches_up_with_its_apps_seeing_the_gaps(
    tmp_path: Path,
) -> None:
    keys = [f"Vehicle.Body.K{i}" for i in range(20)]
    relay = Relay()  # the others reach b through it: cut, b is unreachable
    await relay.start()
    nodes = Nodes(["a", "b", "c"], tmp_path, *FAST, reach={"b": relay.address})
    relay.target = ("127.0.0.1", nodes["b"].port)
    with nodes:
        on_a = ProviderClient(nodes["a"].address, "front")
        on_c = ProviderClient(nodes["c"].address, "rear")
        try:
            await on_a.add_keys(keys)
            await on_c.add_keys(keys)
            await on_a.publish({k: b"0" for k in keys})
            await linked(nodes)
            await converged(nodes)
            stop = asyncio.Event()
            written = 0

            async def write(p: ProviderClient, tag: bytes) -> None:
                nonlocal written
                n = 0
                while not stop.is_set():
                    n += 1
                    await p.publish({k: tag + str(n).encode() for k in keys})
                    written += len(keys)
                    await asyncio.sleep(0.01)  # the writers' pace, not synchronisation

            writers = [
                asyncio.create_task(write(on_a, b"a")),
                asyncio.create_task(write(on_c, b"c")),
            ]
            await eventually(lambda: written >= 200, timeout=10, what="writes before the kill")
            nodes["b"].kill()
            relay.close()  # a and c cannot reach b until it is back (and its app listening)
            before = written
            await eventually(
                lambda: written >= before + 400, timeout=10, what="writes while b is down"
            )
            stop.set()
            await asyncio.gather(*writers)
            await on_a.flush()
            await on_c.flush()
        finally:
            await on_a.close()
            await on_c.close()
        nodes["b"].start()
        # An app on the restarted b: its keys (added here: names travel), a small queue.
        adder = ProviderClient(nodes["b"].address, "body-app")
        await adder.add_keys(keys)
        await adder.close()
        app = AppClient(nodes["b"].address, "body-app", queues=[QueueSpec(0, 40, 40)], window=1)
        try:
            await app.connect()
            assert all(r.ok for r in await app.subscribe([Sub(k, on_update=True) for k in keys]))
            healed = time.monotonic()
            relay.open()
            await converged(nodes, timeout=3 * SYNC + 5)
            took = time.monotonic() - healed
            # Within three sync intervals of b being reachable again.
            assert took <= 3 * SYNC, f"caught up in {took:.2f} s"
            expected = {v.name: v.data for v in (await get(nodes["a"].address, keys)).values}
            latest: dict[str, bytes | None] = {}
            missed = 0
            async for batch in app.batches():
                for e in batch:
                    if isinstance(e, DataEvent):
                        assert e.name is not None
                        latest[e.name] = e.data
                        missed += e.missed
                if latest == expected:
                    break
        finally:
            await app.close()
        assert missed > 0  # the writes b never applied one by one show as seq gaps
        assert {v.name: v.data for v in (await get(nodes["b"].address, keys)).values} == expected
    await relay.stop()


async def test_a_peer_that_stops_reading_stalls_no_one_and_costs_bounded_memory(
    tmp_path: Path,
) -> None:
    keys = [f"Vehicle.Chassis.K{i}" for i in range(50)]
    with Nodes(["a", "b", "c"], tmp_path, *FAST, "--cluster-max-events", "300") as nodes:
        provider = ProviderClient(nodes["a"].address, "chassis")
        local = AppClient(nodes["a"].address, "local-app", queues=[QueueSpec(0, 10, 200)])
        remote = AppClient(nodes["b"].address, "remote-app", queues=[QueueSpec(0, 10, 200)])
        try:
            await provider.add_keys(keys)
            await wait_keys(nodes["b"].address, keys)
            counts = {"local": 0, "remote": 0}

            async def count(app: AppClient, which: str) -> None:
                async for batch in app.batches():
                    counts[which] += sum(isinstance(e, DataEvent) for e in batch)

            readers = []
            for app, which in ((local, "local"), (remote, "remote")):
                await app.connect()
                await app.subscribe([Sub(k, on_update=True) for k in keys])
                readers.append(asyncio.create_task(count(app, which)))
            await linked(nodes)
            nodes["c"].pause()  # c reads nothing from now on
            started = time.monotonic()
            sent = 0
            for round_ in range(100):  # 5,000 updates of 2 KB (10 MB), 100 events
                await provider.publish({k: round_.to_bytes(2, "big") + bytes(2000) for k in keys})
                sent += len(keys)
                await eventually(
                    lambda s=sent: min(counts.values()) >= s - 100, timeout=10, what="both apps"
                )
            await eventually(lambda: min(counts.values()) == 5000, timeout=10, what="the last")
            elapsed = time.monotonic() - started
            assert counts == {"local": 5000, "remote": 5000}
            assert elapsed < 15, f"{elapsed:.1f} s with c stopped"
            st = await status(nodes["a"].address)
            assert st.retained <= 300  # what a keeps for c is bounded, whatever c reads
            assert st.pending == 0
            link = {p.name: p for p in st.peers}
            # c's link is blocked (gRPC flow control): it took part of what b got, then waited.
            assert link["c"].sent < link["b"].sent
            assert link["c"].unconfirmed >= 100
            nodes["c"].resume()
            await converged(nodes, timeout=20)
            for r in readers:
                r.cancel()
        finally:
            await local.close()
            await remote.close()
            await provider.close()


# -- what a peer may not say ------------------------------------------------------------------


class FakePeer:
    """A raw gRPC client speaking the peer protocol as node 'fake' (chain boot 7)."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.call = self.channel.stream_stream(
            "/vehicle.cluster.v1.Peer/Link",
            request_serializer=None,
            response_deserializer=cluster_pb2.PeerMessage.FromString,
        )(metadata=(("app-id", "fake"),))
        self.encoder = EventBytes()

    async def hello(self) -> cluster_pb2.Welcome:
        hello = cluster_pb2.PeerMessage(hello=cluster_pb2.Hello(node_id="fake", boot=7))
        await self.call.write(hello.SerializeToString())
        reply = await asyncio.wait_for(self.call.read(), 10)
        assert reply.HasField("welcome")
        return reply.welcome

    async def send(self, *events: Event) -> None:
        await self.call.write(self.encoder.message(Outgoing(events=list(events))))

    async def close(self) -> None:
        self.call.cancel()
        await self.channel.close()


async def test_a_tampered_a_replayed_and_an_out_of_window_event_are_refused_and_journaled(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal"
    # The node lists 'fake' as a peer; its own link to it fails (nobody there): no matter.
    flags = [*FAST, "--peer", "fake=127.0.0.1:9", "--journal-dir", str(journal)]
    node = Node("x", free_port(), flags, tmp_path / "x.log")
    node.start()
    try:
        fake = FakePeer(node.address)
        welcome = await fake.hello()
        assert welcome.node_id == "x"
        now = time.time_ns()
        good = make_event(
            "fake", 7, 1, b"", b"", now, Kind.WRITE, [Write("Vehicle.K", b"good", 1, now)]
        )
        await fake.send(good)
        await eventually_async(lambda: _value(node.address, "Vehicle.K"), b"good")
        before = await status(node.address)
        assert before.refused == {}
        honest = make_event(
            "fake", 7, 2, good.hash, b"", now, Kind.WRITE, [Write("Vehicle.K", b"second", 2, now)]
        )
        # The bytes changed on the way, the hash not: it no longer matches.
        tampered = dataclasses.replace(honest, writes=(Write("Vehicle.K", b"EVIL", 2, now),))
        old = make_event(
            "fake",
            7,
            2,
            good.hash,
            b"",
            now - 3600 * 10**9,
            Kind.WRITE,
            [Write("Vehicle.K", b"stale", 2, now)],
        )
        await fake.send(tampered, good, old)
        await eventually_async(
            lambda: _refused(node.address), {"tampered": 1, "already held": 1, "too old": 1}
        )
        after = await status(node.address)
        assert (after.digest, after.head) == (before.digest, before.head)
        assert (await get(node.address, ["Vehicle.K"])).values[0].data == b"good"
        assert {p.name: dict(p.refused) for p in after.peers} == {
            "fake": {"tampered": 1, "already held": 1, "too old": 1}
        }
        await fake.close()
    finally:
        assert node.stop() == 0
    records = [
        json.loads(line)
        for path in sorted(journal.glob("*.jsonl*"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    refused = {r["reason"]: r for r in records if r["kind"] == "cluster_refused"}
    assert set(refused) == {"tampered", "already held", "too old"}
    assert refused["already held"]["event_hash"] == good.hash.hex()
    assert all(r["peer"] == "fake" and r["count"] == 1 for r in refused.values())


async def _value(address: str, name: str) -> bytes | None:
    reply = await get(address, [name])
    return reply.values[0].data if reply.values and reply.values[0].HasField("data") else None


async def _refused(address: str) -> dict[str, int]:
    return dict((await status(address)).refused)
