"""A link to one peer: dial it, say hello, then send what the model composes for it.

Each link is one task. It dials the peer's address, opens the ``Link``
stream, sends ``hello`` and waits for the peer's ``welcome`` (its node id,
which must be the name this node knows it by, its boot and its leaves);
then the model knows the peer is up and where to start, and the link writes
whatever :meth:`replica.Model.next_message` composes whenever it is woken.
gRPC flow control makes a write wait while the peer does not read: only
this link waits, and nothing piles up (the model composes from its state,
not from a queue). When the stream fails, the model is told the peer is
down and the link dials again after a backoff (50 ms doubling to 2 s).
With ``peer_tls_ca`` it dials with TLS (and this node's client certificate,
``peer_tls_cert``, for peers with mutual TLS).

Each state change (``connecting``, ``up``, ``down``) is logged once, with
the reason for ``down``; retries while down are not logged again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import grpc
from vehicle_middleware.contract.channel import Backoff, Tls
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2
from vehicle_middleware.replica import Model
from vehicle_middleware.server.cluster import convert

__all__ = ["LINK_METHOD", "MESSAGE_BUDGET", "PeerLink"]

log = logging.getLogger(__name__)

LINK_METHOD: Final = "/vehicle.cluster.v1.Peer/Link"
MESSAGE_BUDGET: Final = 256 * 1024
"""Bytes of events per message to a peer (about): small messages keep latency low."""
_WELCOME_TIMEOUT_S: Final = 10.0
_OPTIONS: Final = [
    # A peer that vanished is found within seconds, and dialed again quickly.
    ("grpc.keepalive_time_ms", 2_000),
    ("grpc.keepalive_timeout_ms", 2_000),
    ("grpc.http2.ping_timeout_ms", 2_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


class LinkError(Exception):
    """The peer is not who it should be, or ended the link."""


class PeerLink:
    """This node's link to one peer."""

    def __init__(
        self,
        model: Model,
        encoder: convert.EventBytes,
        hello: bytes,
        changed: Callable[[PeerLink, int | None], None],
        name: str,
        address: str,
        md: tuple[tuple[str, str], ...],
        max_bytes: int,
        tls: Tls | None = None,
    ) -> None:
        """A link to peer ``name`` at ``address``.

        ``model``: the node's replicated model (what to send, peer up and down);
        ``encoder``: turns the model's messages into bytes; ``hello``: this
        node's first message (serialized); ``changed``: told of each state change (with the
        peer's boot once up); ``md``: the identity metadata of the call.
        """
        self._model = model
        self._encoder = encoder
        self._hello = hello
        self._changed = changed
        self._max_bytes = max_bytes
        self._tls = tls
        self.name = name
        self.address = address
        self.state = "connecting"
        self.since = time.monotonic()
        self.error = ""
        self.wake = asyncio.Event()
        self._md = md
        self._was_up = False

    def _set(self, state: str, error: str = "", boot: int | None = None) -> None:
        if state == self.state:
            if error != self.error:  # down still, for another reason: the operator sees it
                self.error = error
                log.info("peer %s (%s): link down: %s", self.name, self.address, error)
            return
        self.state, self.error, self.since = state, error, time.monotonic()
        if state == "down":
            # A peer not started yet is normal at boot; one that was up and went is news.
            level = logging.WARNING if self._was_up else logging.INFO
            log.log(level, "peer %s (%s): link down: %s", self.name, self.address, error)
        else:
            self._was_up = True
            log.info("peer %s (%s): link %s", self.name, self.address, state)
        self._changed(self, boot)

    async def run(self) -> None:
        log.info("peer %s (%s): link connecting", self.name, self.address)
        backoff = Backoff(first=0.05, cap=2.0)
        options = [
            *_OPTIONS,
            ("grpc.max_send_message_length", self._max_bytes),
            ("grpc.max_receive_message_length", self._max_bytes),
        ]
        while True:
            if self._tls is None:
                channel = grpc.aio.insecure_channel(self.address, options=options)
            else:
                channel = grpc.aio.secure_channel(
                    self.address, self._tls.credentials(), options=options
                )
            up = False
            try:
                call: Any = channel.stream_stream(
                    LINK_METHOD,
                    request_serializer=None,  # bytes, composed by convert.EventBytes
                    response_deserializer=cluster_pb2.PeerMessage.FromString,
                )(metadata=self._md)
                await call.write(self._hello)
                reply = await asyncio.wait_for(call.read(), _WELCOME_TIMEOUT_S)
                if not isinstance(reply, cluster_pb2.PeerMessage) or not reply.HasField("welcome"):
                    raise LinkError("the peer ended the link before its welcome")
                welcome = reply.welcome
                if welcome.node_id != self.name:
                    raise LinkError(
                        f"the node at {self.address} is {welcome.node_id!r}, not {self.name!r}: "
                        "check --peer NAME=ADDRESS (NAME is the peer's --node-id)"
                    )
                self._model.peer_up(self.name, welcome.boot, convert.leaves_from_pb(welcome.leaves))
                up = True
                self._set("up", boot=welcome.boot)
                backoff.reset()
                await self._send(call)
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                self._set("down", await _ended_with(call))
            except (LinkError, TimeoutError, OSError) as e:
                self._set("down", str(e) or type(e).__name__)
            except Exception as e:  # a bug must not end the link for good
                log.exception("peer %s (%s): link failed", self.name, self.address)
                self._set("down", f"internal error: {type(e).__name__}: {e}")
            finally:
                if up:
                    self._model.peer_down(self.name)
                await channel.close(grace=None)
            await asyncio.sleep(backoff.delay())

    async def _send(self, call: Any) -> None:
        model = self._model
        encoder = self._encoder
        wake = self.wake
        loop = asyncio.get_running_loop()
        # Confirmations held back to go together are due at a time: one timer
        # rings the link then, however often it is woken before (each message
        # a peer sends wakes every link, mostly for nothing).
        timer: asyncio.TimerHandle | None = None
        try:
            while True:
                if call.done():
                    raise LinkError("the peer ended the link")
                wake.clear()
                # Let the writes of this loop iteration gather into fewer, larger messages.
                await asyncio.sleep(0)
                out = model.next_message(self.name, MESSAGE_BUDGET)
                if out is None:
                    hint = model.wait_hint(self.name)
                    if hint is not None:
                        now = loop.time()
                        due = now + hint
                        # A pending timer that rings by then serves; else ring at due.
                        if timer is None or not now < timer.when() <= due:
                            if timer is not None:
                                timer.cancel()
                            timer = loop.call_at(due, wake.set)
                    await wake.wait()
                    continue
                await call.write(encoder.message(out))
        finally:
            if timer is not None:
                timer.cancel()


async def _ended_with(call: Any) -> str:
    """The status the peer ended ``call`` with, as ``CODE: details``.

    A write that races the peer's end of the call fails with grpc's own
    ``INTERNAL`` ("Internal error from Core") or ``InvalidStateError``, which
    hide why the peer refused (e.g. a token without the ``peer`` scope); the
    call itself still holds the peer's status.
    """
    try:
        code = await asyncio.wait_for(call.code(), _WELCOME_TIMEOUT_S)
        details = await call.details()
    except TimeoutError:
        return "the call failed and the peer sent no status"
    return f"{code.name}: {details}"
