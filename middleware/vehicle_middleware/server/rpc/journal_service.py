"""The JournalService servicer: RegisterConsumer, UnregisterConsumer, ListConsumers,
Poll, Follow. Thin: identity and scope, conversion, one call into the journal's feed
(:mod:`vehicle_middleware.server.journal.feed`); Follow's loop is
:mod:`vehicle_middleware.server.journal.follow`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as pb
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2_grpc as pb_grpc
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.scopes import JOURNAL_READ
from vehicle_middleware.server.errors import (
    InvalidRequestError,
    JournalDisabledError,
    ScopeDeniedError,
    UnknownConsumerError,
)
from vehicle_middleware.server.journal.feed import Feed
from vehicle_middleware.server.journal.follow import FollowSession, Group
from vehicle_middleware.server.journal.poll_answers import MAX_WINDOW, check_limits, check_want
from vehicle_middleware.server.rpc import convert
from vehicle_middleware.server.rpc.identity import caller
from vehicle_middleware.server.rpc.status import check_decoded, maps_errors

__all__ = ["JournalService"]


class JournalService(pb_grpc.JournalServiceServicer):
    def __init__(self, authenticator: Authenticator, feed: Feed | None, vehicle_id: str) -> None:
        """``feed``: what the journal's consumers read (None: no journal)."""
        self._authenticator = authenticator
        self._feed = feed
        self._vehicle = vehicle_id
        self._followers: dict[tuple[str, str], FollowSession] = {}
        self._following: set[asyncio.Task[Any]] = set()  # every Follow call's task

    def _caller(self, context: grpc.aio.ServicerContext[Any, Any]) -> tuple[Caller, Feed]:
        """The caller, allowed to read the journal, and the journal's feed.

        Raises:
            UnauthenticatedError, LimitExceededError, ScopeDeniedError, JournalDisabledError.
        """
        who = caller(context, self._authenticator)
        if not (who.grants.everything or who.grants.journal):
            raise ScopeDeniedError(who.app, "read the journal", JOURNAL_READ)
        feed = self._feed
        if feed is None:
            raise JournalDisabledError(
                "this middleware runs without a journal: start it with --journal-dir DIR"
            )
        return who, feed

    @maps_errors()
    async def RegisterConsumer(
        self, request: pb.RegisterConsumerRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RegisterConsumerResponse:
        who, feed = self._caller(context)
        consumer, created = await feed.register(
            who.app, request.component, from_newest=request.from_newest
        )
        return pb.RegisterConsumerResponse(
            created=created,
            position=pb.Position(boot_id=consumer.boot_id, offset=consumer.offset),
            vehicle_id=self._vehicle,
            boot_id=feed.boot_id,
        )

    @maps_errors()
    async def UnregisterConsumer(
        self, request: pb.UnregisterConsumerRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.UnregisterConsumerResponse:
        who, feed = self._caller(context)
        gone = await feed.unregister(who.app, request.component)
        follower = self._followers.get((who.app, request.component))
        if follower is not None:
            follower.fail(UnknownConsumerError(who.app, request.component))
        return pb.UnregisterConsumerResponse(was_registered=gone)

    @maps_errors()
    async def ListConsumers(
        self, request: pb.ListConsumersRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListConsumersResponse:
        who, feed = self._caller(context)
        states = await feed.states(None if request.all_apps else who.app)
        return pb.ListConsumersResponse(
            consumers=[convert.consumer_info(s) for s in states],
            vehicle_id=self._vehicle,
            boot_id=feed.boot_id,
        )

    @maps_errors()
    async def Poll(
        self, request: pb.PollRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.PollResponse:
        who, feed = self._caller(context)
        consumer = feed.consumer(who.app, request.component)
        check_limits(request.max)
        want = check_want(request.want)
        ack = (request.ack.boot_id, request.ack.offset) if request.HasField("ack") else None
        answer = await feed.poll(
            consumer, request.boot_id, request.offset, max_records=request.max, want=want, ack=ack
        )
        return convert.poll_response(answer, self._vehicle)

    @maps_errors()
    async def Follow(
        self,
        request_iterator: AsyncIterator[pb.FollowRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        who, feed = self._caller(context)
        first = await anext(request_iterator, None)
        check_decoded(first)
        if first is None or first.WhichOneof("kind") != "start":
            raise InvalidRequestError("start", "a Follow stream's first message must be start")
        start = first.start
        consumer = feed.consumer(who.app, start.component)
        check_limits(start.max, field="start.max")
        want = check_want(start.want, field="start.want")
        if not 1 <= start.window <= MAX_WINDOW:
            raise InvalidRequestError(
                "start.window", f"must be in 1..{MAX_WINDOW}, got {start.window}"
            )
        session = FollowSession(
            feed,
            who.app,
            consumer,
            boot_id=start.boot_id,
            offset=start.offset,
            want=want,
            max_records=start.max,
            window=start.window,
        )
        key = (who.app, start.component)
        if consumer is not None:
            older = self._followers.get(key)
            if older is not None:
                older.replace()
            self._followers[key] = session
        # The headers now, not with the first group: a session ended while that write
        # waits on flow control can then still send its status (after the data).
        await context.send_initial_metadata(())
        reader = asyncio.create_task(self._acks(session, request_iterator))
        vehicle = self._vehicle

        async def send(group: Group) -> None:
            await context.write(convert.follow_batch(group, vehicle))

        task = asyncio.current_task()
        if task is not None:
            self._following.add(task)
        try:
            await session.run(send)
        except asyncio.CancelledError:
            # Ended by the session (replaced, unregistered, a bad ack) while it waited
            # or wrote: say why (FollowReplacedError: ABORTED). Else the peer went away.
            if session.error is None or context.cancelled():
                raise
            raise session.error from None
        finally:
            self._following.discard(task)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            if self._followers.get(key) is session:
                del self._followers[key]

    def session_of(self, app: str, component: str) -> FollowSession | None:
        """The open Follow session of ``app``'s consumer ``component``, if any."""
        return self._followers.get((app, component))

    async def finish(self, timeout: float) -> None:
        """The journal is closed (its ``stop`` record written): let every Follow send
        what is left and see it acknowledged, for at most ``timeout`` seconds."""
        feed = self._feed
        if feed is None:
            return
        feed.end()
        if self._following:
            await asyncio.wait(set(self._following), timeout=timeout)

    async def _acks(
        self, session: FollowSession, requests: AsyncIterator[pb.FollowRequest]
    ) -> None:
        """Read the consumer's acknowledgements; a bad message ends the session."""
        try:
            async for message in requests:
                check_decoded(message)
                if message.WhichOneof("kind") == "ack":
                    await session.ack(message.ack.seq)
                else:
                    raise InvalidRequestError(
                        "start", "sent twice: a Follow stream starts once; then only acks"
                    )
        except Exception as e:  # a bad message, or a broken stream: the session ends with it
            session.fail(e)
