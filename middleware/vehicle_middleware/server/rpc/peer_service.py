"""The Peer servicer: the links peers open to this node, and Status. Thin.

``Link``: the caller must be a listed peer whose identity (its ``app-id``,
token subject or certificate name) is the node id it says hello with (in
token mode it also needs the ``peer`` scope); this
node answers with its welcome, then hands each message to the node.
``Status``: the node's view, for ``python -m vehicle_middleware.tools cluster-status``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2, cluster_pb2_grpc
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.scopes import PEER
from vehicle_middleware.server.cluster import convert
from vehicle_middleware.server.cluster.node import ClusterNode
from vehicle_middleware.server.errors import ScopeDeniedError, StreamConflictError
from vehicle_middleware.server.rpc.decoding import Malformed
from vehicle_middleware.server.rpc.identity import caller
from vehicle_middleware.server.rpc.status import check_decoded, maps_errors

__all__ = ["PeerService"]

log = logging.getLogger(__name__)


class PeerService(cluster_pb2_grpc.PeerServicer):
    def __init__(
        self,
        authenticator: Authenticator,
        node: ClusterNode | None,
        alone: Callable[[], cluster_pb2.StatusResponse],
    ) -> None:
        """``node``: the cluster node (None without peers); ``alone``: the status
        of a middleware without peers (its head and keys, read when asked)."""
        self._authenticator = authenticator
        self._node = node
        self._alone = alone

    def _check_peer(self, who: Caller, what: str) -> None:
        if not (who.grants.everything or who.grants.peer):
            raise ScopeDeniedError(who.app, what, PEER)

    @maps_errors()
    async def Link(
        self,
        requests: AsyncIterator[cluster_pb2.PeerMessage | Malformed],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        who = caller(context, self._authenticator)
        # The hello is read before any refusal: refused at once, the dialing node's
        # write of its hello would race the status and fail with grpc's own INTERNAL
        # or UNAVAILABLE, hiding why (what its cluster status shows the operator).
        first = await anext(aiter(requests), None)
        self._check_peer(who, "open a peer link")
        node = self._node
        if node is None:
            raise StreamConflictError(
                "this middleware has no peers (--peer NAME=ADDRESS): it takes no peer links"
            )
        if first is None:
            raise StreamConflictError("the link ended before its hello")
        check_decoded(first)
        assert isinstance(first, cluster_pb2.PeerMessage)
        if not first.HasField("hello"):
            raise StreamConflictError("the first message of a link must be hello")
        name = first.hello.node_id
        if name not in node.addresses:
            raise StreamConflictError(
                f"node {name!r} is not among the peers of node {node.node_id!r} "
                f"({', '.join(node.addresses)}): every node lists every other"
            )
        if who.app != name:
            # The link's identity (app-id, token subject or certificate name) is the node's.
            raise ScopeDeniedError(who.app, f"speak for node {name!r}", PEER)
        await context.write(convert.welcome(node.node_id, node.boot, node.model.leaves()))
        node.inbound_changed(name, opened=True)
        try:
            async for msg in requests:
                check_decoded(msg)
                assert isinstance(msg, cluster_pb2.PeerMessage)
                node.receive(name, msg)
                await asyncio.sleep(0)  # let local apps and other links run between messages
        except asyncio.CancelledError:
            if not node.stopping or context.cancelled():
                raise
            # This node is stopping: the link ends now, not after the stop grace.
        finally:
            node.inbound_changed(name, opened=False)

    @maps_errors()
    async def Status(
        self, request: cluster_pb2.StatusRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> cluster_pb2.StatusResponse:
        who = caller(context, self._authenticator)
        if not (who.grants.everything or who.grants.peer or who.grants.admin):
            raise ScopeDeniedError(who.app, "read the cluster's status", f"{PEER} or admin")
        node = self._node
        if node is not None:
            return node.status()
        return self._alone()
