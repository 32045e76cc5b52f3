"""The JournalService on a real server: the three answers across the 2^32 wrap and
after an overrun, Follow's groups and acknowledgements, a live follower's gaps, a
reliable consumer cut loose (and nobody else affected), and every bad input."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance, pred, succ, verify_line
from vehicle_middleware.contract.journal.segments import segment_files
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as pb
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2_grpc as pb_grpc
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, QueueSpec, Sub
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.journal.consumers import CONSUMERS_NAME
from vehicle_middleware.server.server import RunningServer, start_server

from tests.conftest import eventually, fails
from tests.integration.conftest import TEST_SETTINGS

Code = grpc.StatusCode
MD = (("app-id", "collector"),)
SPEED = "Vehicle.Speed"
TOP = OFFSET_MOD - 20  # the boot's offsets wrap after 20 records


def settings(tmp_path: Path, **kw: Any) -> Settings:
    return replace_settings(
        TEST_SETTINGS, journal_dir=str(tmp_path / "journal"), journal_level="full", **kw
    )


@contextlib.asynccontextmanager
async def running(s: Settings) -> AsyncIterator[tuple[RunningServer, Any]]:
    server = await start_server(s)
    channel = grpc.aio.insecure_channel(server.address, options=[("grpc.http2.bdp_probe", 0)])
    try:
        yield server, pb_grpc.JournalServiceStub(channel)
    finally:
        await channel.close()
        await server.stop(0)


async def publish(address: str, n: int) -> None:
    provider = ProviderClient(address, "prov")
    try:
        await provider.add_keys([SPEED])
        for i in range(n):
            await provider.publish({SPEED: i.to_bytes(4, "big")})
        await provider.flush()
    finally:
        await provider.close()


async def settled(server: RunningServer) -> None:
    """Wait until the journal has written everything it was given, and handed it over
    to its history: its buffer is empty, then its writer thread ends one more pass
    (it writes its batch, hands it to the history, then ticks the feed)."""
    journal, feed = server.runtime.journal, server.runtime.journal_feed
    assert journal is not None
    assert feed is not None
    await eventually(lambda: journal.pending() == 0, timeout=10, what="the journal writer")
    passes: list[None] = []
    tick = feed.tick

    def counted() -> None:
        tick()
        passes.append(None)

    setattr(feed, "tick", counted)  # noqa: B010 (the writer thread calls feed.tick)
    try:
        await eventually(lambda: bool(passes), timeout=10, what="the writer's next pass")
    finally:
        delattr(feed, "tick")


async def poll(
    stub: Any,
    component: str = "LIVE",
    boot: str = "",
    offset: int = 0,
    *,
    max: int = 1000,
    **kw: Any,
) -> Any:
    return await stub.Poll(
        pb.PollRequest(component=component, boot_id=boot, offset=offset, max=max, **kw),
        metadata=MD,
        timeout=10,
    )


def disk_bytes(directory: Path) -> int:
    """The segments' bytes on disk at one instant, at most (while the journal writes).

    Listing and stat-ing the files is not atomic: a segment stat-ed just before
    retention removes it and the new segment stat-ed after it filled would both
    count (a segment too many). So only the files listed both before and after
    the stats count: they all existed at the second listing, each at least as
    big as stat-ed (what is created meanwhile is left out).
    """
    sizes: dict[Path, int] = {}
    for path in segment_files(directory):
        with contextlib.suppress(FileNotFoundError):  # retention removed it meanwhile
            sizes[path] = path.stat().st_size
    still = set(segment_files(directory))
    return sum(size for path, size in sizes.items() if path in still)


def records(answer: Any) -> list[dict[str, Any]]:
    return [verify_line(line) for line in answer.records.lines]


async def read_all(stub: Any, boot: str, offset: int, *, max: int = 7) -> list[dict[str, Any]]:
    """Poll from ``offset`` until nothing is new; every answer must be records."""
    got: list[dict[str, Any]] = []
    while True:
        answer = await poll(stub, "LIVE", boot, offset, max=max)
        if answer.WhichOneof("answer") == "nothing_new":
            return got
        assert answer.WhichOneof("answer") == "records", answer
        got += records(answer)
        offset = answer.records.last_offset


async def test_poll_gives_the_three_answers_across_the_wrap_and_after_an_overrun(
    tmp_path: Path,
) -> None:
    s = settings(
        tmp_path,
        journal_offset_start=TOP,
        journal_segment_bytes=4096,
        journal_max_bytes=12_000,
        journal_history_records=10,  # most of what is read comes from disk
    )
    async with running(s) as (server, stub):
        boot = server.runtime.boot_id
        await settled(server)
        # A new consumer (holding nothing, no boot): a recovery naming the boot and its range.
        answer = await poll(stub, offset=12345)
        assert answer.WhichOneof("answer") == "recovery"
        rec = answer.recovery
        assert (rec.boot_id, rec.n0, rec.reason, rec.current_boot_id) == (
            boot,
            TOP,
            pb.RECOVERY_REASON_NOT_IN_HISTORY,
            boot,
        )
        await publish(server.address, 24)
        await settled(server)
        # Case 1 from p(n0): every record, in order, across 2^32 - 1 -> 0, chained.
        got = await read_all(stub, boot, pred(rec.n0))
        offsets = [r["offset"] for r in got]
        assert offsets[0] == TOP
        assert got[0]["kind"] == "start"
        assert OFFSET_MOD - 1 in offsets
        assert 0 in offsets
        assert all(succ(a) == b for a, b in itertools.pairwise(offsets))
        assert all(b["prev_hash"] == a["hash"] for a, b in itertools.pairwise(got))
        # Case 2: the newest record gets nothing new.
        answer = await poll(stub, "LIVE", boot, offsets[-1])
        assert answer.WhichOneof("answer") == "nothing_new"
        # Case 3 by overrun: retention removes the oldest segments; holding an early one
        # is a recovery with what is held now, and p(n0) reads on from n0.
        await publish(server.address, 120)
        await settled(server)
        answer = await poll(stub, "LIVE", boot, offsets[2])
        assert answer.WhichOneof("answer") == "recovery"
        rec = answer.recovery
        assert rec.boot_id == boot
        assert rec.reason == pb.RECOVERY_REASON_NOT_IN_HISTORY
        assert (rec.n0 - TOP) % OFFSET_MOD > 3
        again = await poll(stub, "LIVE", boot, pred(rec.n0), max=3)
        assert [r["offset"] for r in records(again)] == [rec.n0, succ(rec.n0), succ(succ(rec.n0))]
        # An offset this boot never wrote is not a recovery: it is the wrong boot's.
        await fails(
            poll(stub, "LIVE", boot, (rec.n1 + 1000) % OFFSET_MOD),
            Code.OUT_OF_RANGE,
            f"is not an offset of boot '{boot}'",
        )


async def test_bad_input_gets_a_status_and_a_message_naming_the_field(tmp_path: Path) -> None:
    async with running(settings(tmp_path, journal_max_consumers=2)) as (server, stub):
        await settled(server)
        boot = server.runtime.boot_id
        register = stub.RegisterConsumer
        await fails(
            register(pb.RegisterConsumerRequest(component="LIVE"), metadata=MD),
            Code.INVALID_ARGUMENT,
            "component: 'LIVE' is reserved for live consumers",
        )
        await fails(
            register(pb.RegisterConsumerRequest(component="no-dashes"), metadata=MD),
            Code.INVALID_ARGUMENT,
            "component: must be 1 to 16 characters of [A-Za-z0-9_], got 'no-dashes'",
        )
        await fails(
            poll(stub, "nobody"),
            Code.NOT_FOUND,
            "component 'nobody' of app 'collector' is not a registered journal consumer",
        )
        for bad in (0, 5000):
            await fails(
                poll(stub, max=bad), Code.INVALID_ARGUMENT, f"max: must be in 1..1000, got {bad}"
            )
        await fails(
            poll(stub, want=["lost", "nope"]),
            Code.INVALID_ARGUMENT,
            "want[1]: unknown record kind 'nope'",
        )
        window = server.runtime.journal_feed.history.window()  # type: ignore[union-attr]
        assert window is not None
        await fails(
            poll(stub, "LIVE", boot, (window[1] + 10**6) % OFFSET_MOD),
            Code.OUT_OF_RANGE,
            f"is not an offset of boot '{boot}', which wrote offsets {window[0]}..",
        )
        for component in ("a", "b"):
            await register(pb.RegisterConsumerRequest(component=component), metadata=MD)
        never = (window[1] + 9) % OFFSET_MOD
        await fails(
            poll(stub, "a", boot, window[1], ack=pb.Position(boot_id=boot, offset=never)),
            Code.OUT_OF_RANGE,
            f"ack.offset: {never} is not an offset of boot '{boot}'",
        )
        await fails(
            register(pb.RegisterConsumerRequest(component="c"), metadata=MD),
            Code.RESOURCE_EXHAUSTED,
            "journal consumers: 2 are registered; unregister one first; the limit is 2",
        )
        # Follow: start first, once; a window in range; acknowledge only what was sent.
        for first, detail in (
            (pb.FollowRequest(ack=pb.FollowAck(seq=0)), "start: a Follow stream's first message"),
            (
                pb.FollowRequest(start=pb.FollowStart(component="a", max=10, window=0)),
                "start.window: must be in 1..256, got 0",
            ),
            (
                pb.FollowRequest(start=pb.FollowStart(component="a", max=0, window=1)),
                "start.max: must be in 1..1000, got 0",
            ),
        ):
            call = stub.Follow(metadata=MD)
            await call.write(first)
            await fails(call.read(), Code.INVALID_ARGUMENT, detail)
        call = stub.Follow(metadata=MD)
        await call.write(pb.FollowRequest(start=pb.FollowStart(component="a", max=10, window=4)))
        first_group = await call.read()
        await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=first_group.seq + 7)))

        async def read_until_it_ends() -> None:
            for _ in range(100):  # the groups already sent, then the status
                await call.read()

        await fails(
            read_until_it_ends(), Code.INVALID_ARGUMENT, "ack.seq: group 7 was not sent yet"
        )
    async with running(replace_settings(TEST_SETTINGS)) as (_, stub):
        await fails(
            poll(stub),
            Code.FAILED_PRECONDITION,
            "runs without a journal: start it with --journal-dir",
        )


async def test_in_token_mode_only_the_journal_read_scope_reads_the_journal(tmp_path: Path) -> None:
    private, public = generate_key_pair("ES256")
    (tmp_path / "vehicle_middleware.pub").write_bytes(public)
    s = settings(
        tmp_path, auth_mode="token", token_public_key=str(tmp_path / "vehicle_middleware.pub")
    )
    async with running(s) as (server, stub):
        reader = mint(private, subject="reader", scope="read:**", ttl_s=60)
        collector = mint(private, subject="coll", scope="journal:read", ttl_s=60)
        request = pb.RegisterConsumerRequest(component="c")
        await fails(
            stub.RegisterConsumer(request, metadata=(("authorization", f"Bearer {reader}"),)),
            Code.PERMISSION_DENIED,
            "app 'reader' may not read the journal: its token has no 'journal:read' scope",
        )
        reply = await stub.RegisterConsumer(
            request, metadata=(("authorization", f"Bearer {collector}"),)
        )
        assert reply.created
        assert reply.boot_id == server.runtime.boot_id


async def test_follow_sends_groups_at_once_numbered_from_zero_and_acks_release(
    tmp_path: Path,
) -> None:
    async with running(settings(tmp_path)) as (server, stub):
        await settled(server)
        reg = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="f"), metadata=MD)
        call = stub.Follow(metadata=MD)
        await call.write(
            pb.FollowRequest(
                start=pb.FollowStart(
                    component="f",
                    boot_id=reg.position.boot_id,
                    offset=reg.position.offset,
                    max=5,
                    window=2,
                )
            )
        )
        groups: asyncio.Queue[Any] = asyncio.Queue()

        async def read() -> None:
            while (message := await call.read()) is not grpc.aio.EOF:
                await groups.put(message)

        reader = asyncio.create_task(read())
        try:
            await publish(server.address, 20)
            await settled(server)
            first = [await asyncio.wait_for(groups.get(), 5) for _ in range(2)]
            assert [g.seq for g in first] == [0, 1]
            # The behaviour tested, not synchronisation: for a while, nothing more comes.
            await asyncio.sleep(0.3)
            assert groups.empty()  # two groups unacknowledged: the window is full
            await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=1)))
            listed = await stub.ListConsumers(pb.ListConsumersRequest(), metadata=MD)
            await eventually(lambda: not groups.empty(), what="groups after the ack")
            listed = await stub.ListConsumers(pb.ListConsumersRequest(), metadata=MD)
            [info] = listed.consumers
            assert info.position.offset == first[1].records.last_offset  # released up to it
            seq, offsets = 1, [verify_line(x)["offset"] for g in first for x in g.records.lines]
            while True:  # read on (acknowledging) until caught up
                group = await asyncio.wait_for(groups.get(), 5)
                assert group.seq == seq + 1
                seq = group.seq
                offsets += [verify_line(x)["offset"] for x in group.records.lines]
                await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=seq)))
                if group.records.caught_up:
                    break
            assert all(succ(a) == b for a, b in itertools.pairwise(offsets))
            # Idle: one write is sent at once, not after a timer.
            sent = time.monotonic()
            await publish(server.address, 1)
            group = await asyncio.wait_for(groups.get(), 5)
            assert group.seq == seq + 1
            assert time.monotonic() - sent < 0.5
            # The acknowledgements reach the registry's file within a second or so,
            # written by the journal's thread (the event loop only acknowledges in memory).
            registry = tmp_path / "journal" / CONSUMERS_NAME

            def on_file() -> int:
                return int(json.loads(registry.read_bytes())["consumers"][0]["offset"])

            await eventually(
                lambda: on_file() == offsets[-1], timeout=5, what="the acks on the file"
            )
        finally:
            reader.cancel()
            call.cancel()


async def test_a_live_follower_that_falls_behind_gets_a_gap_in_the_group_numbers(
    tmp_path: Path,
) -> None:
    async with running(settings(tmp_path, journal_history_records=20)) as (server, stub):
        await settled(server)
        call = stub.Follow(metadata=MD)
        await call.write(pb.FollowRequest(start=pb.FollowStart(component="LIVE", max=1, window=1)))
        await publish(server.address, 1)
        first = await asyncio.wait_for(call.read(), 5)  # it follows (from the newest record)
        await publish(server.address, 1500)  # not read meanwhile: flow control holds the sender
        await settled(server)
        seqs: list[int] = [first.seq]
        newest = server.runtime.journal_feed.history.window()[1]  # type: ignore[union-attr,index]
        last = -1
        while last != newest:
            group = await asyncio.wait_for(call.read(), 5)
            seqs.append(group.seq)
            last = group.records.last_offset
        call.cancel()
        assert seqs[0] == 0
        assert any(b - a > 1 for a, b in itertools.pairwise(seqs)), "no gap"
        assert all(b > a for a, b in itertools.pairwise(seqs))


async def test_a_consumer_that_stops_reading_is_cut_loose_and_nobody_else_is_affected(
    tmp_path: Path,
) -> None:
    segment, lag = 8192, 150_000
    s = settings(
        tmp_path,
        journal_segment_bytes=segment,
        journal_max_bytes=16_384,
        journal_consumer_max_lag_bytes=lag,
        journal_history_records=50,
    )
    writes = 1500
    async with running(s) as (server, stub):
        await settled(server)
        slow = await stub.RegisterConsumer(
            pb.RegisterConsumerRequest(component="slow"), metadata=MD
        )
        fast = await stub.RegisterConsumer(
            pb.RegisterConsumerRequest(component="fast"), metadata=MD
        )
        seen: list[dict[str, Any]] = []
        most_on_disk = 0
        stop = asyncio.Event()
        fast_at = [fast.position.offset]

        async def fast_reader() -> None:
            nonlocal most_on_disk
            boot, offset = fast.position.boot_id, fast.position.offset
            while True:
                answer = await poll(stub, "fast", boot, offset, max=50)
                kind = answer.WhichOneof("answer")
                assert kind != "recovery", answer.recovery  # it keeps up: never cut loose
                if kind == "records":
                    seen.extend(records(answer))
                    offset = fast_at[0] = answer.records.last_offset
                elif stop.is_set():
                    return
                else:
                    await asyncio.sleep(0.005)  # the fast consumer's polling pace, not a wait
                most_on_disk = max(most_on_disk, disk_bytes(Path(s.journal.dir)))

        events: list[DataEvent] = []

        async def app() -> None:
            async with AppClient(server.address, "app", queues=[QueueSpec(0, 10, 200)]) as client:
                await client.subscribe([Sub(SPEED)])
                async for event in client.events():
                    if isinstance(event, DataEvent):
                        events.append(event)
                        if len(events) == writes:
                            return

        provider = ProviderClient(server.address, "prov")
        await provider.add_keys([SPEED])
        apps = asyncio.create_task(app())
        await eventually(lambda: server.runtime.ess.subscriptions("app") != [], what="subscribed")
        reader = asyncio.create_task(fast_reader())
        history = server.runtime.journal_feed.history  # type: ignore[union-attr]
        for i in range(writes):
            await provider.publish({SPEED: i.to_bytes(4, "big")})
            if i % 50 == 49:  # the fast consumer reads what is written as it goes
                await provider.flush()
                await settled(server)
                await eventually(
                    lambda: fast_at[0] == history.window()[1],  # type: ignore[index]
                    timeout=10,
                    what="the fast consumer to catch up",
                )
        await provider.flush()
        await provider.close()
        await asyncio.wait_for(apps, 20)
        await settled(server)
        stop.set()
        await asyncio.wait_for(reader, 20)
        # Bounded: memory by the history, disk by the consumer's bound plus the segment
        # being written (it ends up to a record over segment_bytes) and the records
        # retention writes into the next one before it removes segments (pinning).
        assert len(server.runtime.journal_feed.history) <= 50  # type: ignore[union-attr]
        assert most_on_disk <= lag + segment + 2048, most_on_disk - lag - segment
        # The journal says who lost what.
        [cut, *_] = [r for r in seen if r["kind"] == "consumer_cut" and r["component"] == "slow"]
        assert (cut["app"], cut["lost_boot_id"]) == ("collector", server.runtime.boot_id)
        assert cut["from_offset"] == succ(slow.position.offset)
        assert not [r for r in seen if r["kind"] == "consumer_cut" and r["component"] == "fast"]
        # The metrics say it too.
        figures = {
            (f.name, dict(f.labels).get("component")): f.value
            for f in server.runtime.collectors.collect()
        }
        assert figures[("vmw_journal_consumer_cuts_total", "slow")] >= 1
        assert figures[("vmw_journal_consumer_cuts_total", "fast")] == 0
        assert figures[("vmw_journal_history_records", None)] <= 50
        # The slow consumer gets a recovery saying so.
        answer = await poll(stub, "slow", slow.position.boot_id, slow.position.offset)
        assert answer.WhichOneof("answer") == "recovery"
        rec = answer.recovery
        assert rec.reason == pb.RECOVERY_REASON_CUT_LOOSE
        assert rec.lost[0].from_offset == succ(slow.position.offset)
        assert rec.lost[0].reason == "consumer cut loose"
        # The fast consumer got every record, in order; the app every event, no gap.
        offsets = [r["offset"] for r in seen]
        assert offsets[0] == succ(fast.position.offset)
        assert all(succ(a) == b for a, b in itertools.pairwise(offsets))
        assert [e.missed for e in events] == [0] * writes
        assert [int.from_bytes(e.data or b"", "big") for e in events] == list(range(writes))
        json.dumps(cut)  # a plain JSON record


async def test_a_registration_survives_a_restart_and_keeps_its_records(tmp_path: Path) -> None:
    s = settings(tmp_path)
    async with running(s) as (server, stub):
        await settled(server)
        first = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="c"), metadata=MD)
        await publish(server.address, 5)
        await settled(server)
        old_boot = server.runtime.boot_id
    async with running(s) as (server, stub):
        await settled(server)
        again = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="c"), metadata=MD)
        assert not again.created
        assert again.position == first.position  # still before the first boot's records
        listed = await stub.ListConsumers(pb.ListConsumersRequest(), metadata=MD)
        assert [(c.app, c.component) for c in listed.consumers] == [("collector", "c")]
        # Its records of the first boot are read from disk, then the restart shows.
        got = await read_all_boots(stub, "c", first.position.boot_id, first.position.offset)
        assert got[0][0] == old_boot
        assert got[-1][0] == server.runtime.boot_id
        assert {b for b, _ in got} == {old_boot, server.runtime.boot_id}


async def read_all_boots(
    stub: Any, component: str, boot: str, offset: int
) -> list[tuple[str, dict[str, Any]]]:
    """A reliable consumer's reading: records, and recoveries into the next boot."""
    got: list[tuple[str, dict[str, Any]]] = []
    while True:
        answer = await poll(stub, component, boot, offset, max=100)
        kind = answer.WhichOneof("answer")
        if kind == "nothing_new":
            return got
        if kind == "recovery":
            assert answer.recovery.reason == pb.RECOVERY_REASON_BOOT_ENDED
            boot, offset = answer.recovery.boot_id, pred(answer.recovery.n0)
            continue
        got += [(answer.records.boot_id, r) for r in records(answer)]
        boot, offset = answer.records.boot_id, answer.records.last_offset


async def test_a_follow_from_a_position_not_held_releases_nothing(tmp_path: Path) -> None:
    """Follow's start acknowledges only a position held (as Poll does): a consumer that
    starts with ("", 0) after a restart, or with an offset its boot never wrote, keeps
    its registered position, so the earlier boot's records stay pinned."""
    s = settings(tmp_path, journal_offset_start=1000)
    async with running(s) as (server, stub):
        await settled(server)
        first = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="c"), metadata=MD)
        await publish(server.address, 5)
        await settled(server)
    async with running(s) as (server, stub):
        await settled(server)
        [before] = (await stub.ListConsumers(pb.ListConsumersRequest(), metadata=MD)).consumers
        assert before.position == first.position
        assert before.unacknowledged_bytes > 0
        boot = server.runtime.boot_id
        # ("", 0): offset 0 is not held in the current boot: a recovery group, no ack.
        call = stub.Follow(metadata=MD)
        start = pb.FollowStart(component="c", boot_id="", offset=0, max=10, window=4)
        await call.write(pb.FollowRequest(start=start))
        group = await asyncio.wait_for(call.read(), 5)
        assert group.WhichOneof("answer") == "recovery"
        assert group.recovery.boot_id == boot
        call.cancel()
        # An offset the current boot never wrote: OUT_OF_RANGE, and no ack either.
        call = stub.Follow(metadata=MD)
        bogus = pb.FollowStart(component="c", boot_id=boot, offset=999_999, max=10, window=4)
        await call.write(pb.FollowRequest(start=bogus))
        await fails(call.read(), Code.OUT_OF_RANGE, "is not an offset of boot")
        [after] = (await stub.ListConsumers(pb.ListConsumersRequest(), metadata=MD)).consumers
        assert after.position == first.position  # still before the first boot's records
        assert after.unacknowledged_bytes == before.unacknowledged_bytes


async def test_a_follow_blocked_writing_ends_at_once_when_a_newer_one_replaces_it(
    tmp_path: Path,
) -> None:
    """A consumer's stream that stopped reading (flow control holds the middleware's
    write) is replaced by its newer Follow: the old one ends ABORTED at once, without
    being read, rather than staying blocked with its session."""
    async with running(settings(tmp_path)) as (server, stub):
        await settled(server)
        reg = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="r"), metadata=MD)
        await publish(server.address, 1500)  # groups of 1000 records: far over a stream window
        await settled(server)
        start = pb.FollowStart(
            component="r",
            boot_id=reg.position.boot_id,
            offset=reg.position.offset,
            max=1000,
            window=8,
        )
        old = stub.Follow(metadata=MD)
        await old.write(pb.FollowRequest(start=start))
        # The old session reaches its first write, which blocks: its group of 1000
        # records is far over the stream's flow-control window, and nobody reads.
        journal = server.journal_service
        assert journal is not None

        def blocked() -> bool:
            session = journal.session_of(MD[0][1], "r")
            return session is not None and session.sending

        await eventually(blocked, timeout=30, what="the old session blocked in its first write")
        new = stub.Follow(metadata=MD)
        await new.write(pb.FollowRequest(start=start))
        group = await asyncio.wait_for(new.read(), 5)
        assert group.seq == 0

        def follow_streams() -> float:
            [value] = [
                f.value
                for f in server.runtime.collectors.collect()
                if f.name == "vmw_journal_follow_streams"
            ]
            return value

        # The old session is gone at once (its handler cancelled in its write), though
        # nobody read its stream; it says why once its reader reads what was sent.
        await eventually(lambda: follow_streams() == 1, what="the old session to end")

        async def read_old_to_its_end() -> None:
            while await asyncio.wait_for(old.read(), 5) is not grpc.aio.EOF:
                pass

        await fails(read_old_to_its_end(), Code.ABORTED, "a newer Follow of consumer 'r'")
        new.cancel()


async def test_a_consumer_holding_nothing_skips_nothing_when_the_offsets_wrap_through_0(
    tmp_path: Path,
) -> None:
    """``(no boot, 0)`` says "holding nothing": after the boot's offsets wrapped through 0,
    Poll (from memory or disk) still answers a recovery naming all the boot holds, and
    reading from ``p(n0)`` returns every record from the boot's first on."""
    async with running(settings(tmp_path, journal_offset_start=TOP)) as (server, stub):
        boot = server.runtime.boot_id
        await publish(server.address, 30)
        await settled(server)
        held = await read_all(stub, boot, pred(TOP))
        assert 0 in [r["offset"] for r in held]  # the offsets wrapped through 0
        for component in ("LIVE", "c"):
            if component != "LIVE":
                await stub.RegisterConsumer(
                    pb.RegisterConsumerRequest(component=component), metadata=MD
                )
            answer = await poll(stub, component, "", 0)
            assert answer.WhichOneof("answer") == "recovery", answer
            rec = answer.recovery
            assert (rec.boot_id, rec.n0) == (boot, TOP)
            assert "holds nothing (no boot_id, offset 0)" in rec.message
        got = await read_all(stub, boot, pred(rec.n0))
        assert [r["offset"] for r in got][: len(held)] == [r["offset"] for r in held]
        assert got[0]["kind"] == "start"
        # The registered consumer's ("", 0) acknowledged nothing: it still pins the start.
        listed = await stub.ListConsumers(pb.ListConsumersRequest(), metadata=MD)
        [c] = listed.consumers
        assert (c.position.boot_id, c.position.offset) == (boot, pred(TOP))


async def test_one_app_at_its_consumer_share_leaves_the_others_theirs_across_a_restart(
    tmp_path: Path,
) -> None:
    """The hostile row for journal consumers: one app registers all it may and is refused
    naming its share; another app (the collector) still registers; a restart that reads
    the registry back keeps both within their shares."""
    greedy = (("app-id", "greedy"),)
    s = settings(tmp_path, journal_max_consumers=6, journal_max_consumers_per_app=4)
    async with running(s) as (server, stub):
        await settled(server)
        for i in range(4):
            await stub.RegisterConsumer(
                pb.RegisterConsumerRequest(component=f"g{i}"), metadata=greedy
            )
        await fails(
            stub.RegisterConsumer(pb.RegisterConsumerRequest(component="g4"), metadata=greedy),
            Code.RESOURCE_EXHAUSTED,
            "journal consumers of app 'greedy': it has 4 registered (each app's share, "
            "journal_max_consumers_per_app); unregister one of its own first; the limit is 4",
        )
        got = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="c"), metadata=MD)
        assert got.created
    # A registry saved under a larger share keeps each app within its share when read back.
    async with running(replace_settings(s, journal_max_consumers_per_app=2)) as (server, stub):
        await settled(server)
        listed = await stub.ListConsumers(pb.ListConsumersRequest(all_apps=True), metadata=MD)
        held = sorted((c.app, c.component) for c in listed.consumers)
        assert held == [("collector", "c"), ("greedy", "g0"), ("greedy", "g1")]
        got = await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="d"), metadata=MD)
        assert got.created


@pytest.mark.parametrize("in_memory", [120, 2000])
async def test_a_consumer_cut_loose_is_told_exactly_what_its_next_poll_cannot_return(
    tmp_path: Path, in_memory: int
) -> None:
    """Retention removes segments whose records memory still holds (some of them, or all):
    a stalled consumer is told lost (recovery answers, consumer_cut records) exactly
    the records its polls then cannot return: no record both told lost and returned,
    none neither."""
    s = settings(
        tmp_path,
        journal_segment_bytes=4096,
        journal_max_bytes=8192,
        journal_consumer_max_lag_bytes=8192,
        journal_history_records=in_memory,  # memory holds more than the disk keeps
    )
    async with running(s) as (server, stub):
        await settled(server)
        slow = await stub.RegisterConsumer(
            pb.RegisterConsumerRequest(component="slow"), metadata=MD
        )
        boot, p0 = slow.position.boot_id, slow.position.offset
        await publish(server.address, 600)
        await settled(server)
        returned: list[dict[str, Any]] = []
        told: set[int] = set()

        def lost(start: int, end: int) -> set[int]:
            return {(start + i) % OFFSET_MOD for i in range(distance(start, end) + 1)}

        offset = p0
        while True:
            answer = await poll(stub, "slow", boot, offset)
            kind = answer.WhichOneof("answer")
            if kind == "nothing_new":
                break
            if kind == "recovery":
                rec = answer.recovery
                assert rec.reason == pb.RECOVERY_REASON_CUT_LOOSE, rec
                for x in rec.lost:
                    told |= lost(x.from_offset, x.to_offset)
                offset = pred(rec.n0)
                continue
            returned += records(answer)
            offset = answer.records.last_offset
        for r in returned:
            if r["kind"] == "consumer_cut" and r["component"] == "slow":
                told |= lost(r["from_offset"], r["to_offset"])
        got = {r["offset"] for r in returned}
        assert not told & got, sorted(told & got)[:5]
        assert told | got == lost(succ(p0), offset)
        assert bool(told) == (in_memory < 600)  # all in memory: nothing is lost


@pytest.mark.parametrize(("max_bytes", "lag"), [(8192, 24_576), (24_576, 8192)])
async def test_a_stalled_consumer_holds_the_disk_to_the_larger_of_the_two_bounds(
    tmp_path: Path, max_bytes: int, lag: int
) -> None:
    """With a registered consumer that never reads, the segments stay within
    max(journal_max_bytes, journal_consumer_max_lag_bytes), plus the segment being
    written and the few records retention writes before it removes (docs/operators.md)."""
    segment = 4096
    s = settings(
        tmp_path,
        journal_segment_bytes=segment,
        journal_max_bytes=max_bytes,
        journal_consumer_max_lag_bytes=lag,
    )
    async with running(s) as (server, stub):
        await settled(server)
        await stub.RegisterConsumer(pb.RegisterConsumerRequest(component="stalled"), metadata=MD)
        provider = ProviderClient(server.address, "prov")
        most = 0
        try:
            await provider.add_keys([SPEED])
            for i in range(800):
                await provider.publish({SPEED: i.to_bytes(4, "big")})
                if i % 10 == 0:
                    most = max(most, disk_bytes(Path(s.journal.dir)))
            await provider.flush()
        finally:
            await provider.close()
        await settled(server)
        most = max(most, disk_bytes(Path(s.journal.dir)))
        bound = max(max_bytes, lag)
        assert most > bound - segment  # it was held up to the bound
        assert most <= bound + segment + 2048, most - bound - segment
