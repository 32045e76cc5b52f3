"""Ordered writes on one node and the peer protocol's guards.

A real server on 127.0.0.1:0 (in process) for a node without peers: the head
in every V-Store response, Set with if_head, the Peer service refusing what
only peers may do; and two real nodes in token mode: peer links need the
``peer`` scope and a token whose subject is the node.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2, cluster_pb2_grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import HeadConflictError, ProviderClient
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.server import RunningServer

from bench.nodes import Nodes
from tests.conftest import eventually_async, fails
from tests.integration.pki import Authority

NAME = "Vehicle.Cabin.Lock"


def set_request(data: bytes, if_head: str | None = None) -> vstore_pb2.SetRequest:
    request = vstore_pb2.SetRequest(updates=[vstore_pb2.Update(name=NAME, data=data)])
    if if_head is not None:
        request.if_head = if_head
    return request


async def test_every_write_and_read_response_carries_the_head(
    server: RunningServer, connect: Any
) -> None:
    s = connect()
    added = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=[NAME]), metadata=s.md)
    assert len(added.head) == 64
    again = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=[NAME]), metadata=s.md)
    assert again.head == added.head  # nothing added, nothing written: same head
    first = await s.vstore.Set(set_request(b"1"), metadata=s.md)
    second = await s.vstore.Set(set_request(b"2"), metadata=s.md)
    assert len({added.head, first.head, second.head}) == 3
    got = await s.vstore.Get(vstore_pb2.GetRequest(names=[NAME]), metadata=s.md)
    assert got.head == second.head
    call = s.vstore.Publish(metadata=s.md)
    await call.write(vstore_pb2.PublishRequest(updates=[vstore_pb2.IdUpdate(id=1, data=b"3")]))
    await call.done_writing()
    summary = await call
    got = await s.vstore.Get(vstore_pb2.GetRequest(names=[NAME]), metadata=s.md)
    assert summary.head == got.head != second.head
    st = await cluster_pb2_grpc.PeerStub(s.channel).Status(
        cluster_pb2.StatusRequest(), metadata=s.md
    )
    assert (st.head, list(st.peers)) == (got.head, [])
    # An app's event stream starts with it too (StreamStarted.head).
    events = s.events.Events(metadata=s.md)
    await events.write(ess_pb2.EventsRequest(open=ess_pb2.OpenEvents()))
    started = (await events.read()).events[0].started
    assert started.head == got.head
    events.cancel()


async def test_set_with_if_head_applies_on_the_newest_head_only(
    server: RunningServer, connect: Any
) -> None:
    s = connect()
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=[NAME]), metadata=s.md)
    head = (await s.vstore.Set(set_request(b"free"), metadata=s.md)).head
    won = await s.vstore.Set(set_request(b"mine", if_head=head), metadata=s.md)
    assert not won.results[0].head_conflict
    assert won.results[0].version == 2
    lost = await s.vstore.Set(set_request(b"yours", if_head=head), metadata=s.md)
    [result] = lost.results
    assert result.head_conflict
    assert (result.head, lost.head, result.version) == (won.head, won.head, 2)
    got = await s.vstore.Get(vstore_pb2.GetRequest(names=[NAME]), metadata=s.md)
    assert (got.values[0].data, got.values[0].version, got.head) == (b"mine", 2, won.head)
    await fails(
        s.vstore.Set(set_request(b"x", if_head="not-a-head"), metadata=s.md),
        grpc.StatusCode.INVALID_ARGUMENT,
        "if_head: 'not-a-head' is not a head",
    )


async def test_a_node_without_peers_takes_no_peer_links(
    server: RunningServer, connect: Any
) -> None:
    s = connect("zone-x")
    err = await refused_link(cluster_pb2_grpc.PeerStub(s.channel), s.md, "zone-x")
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "has no peers" in (err.details() or "")


async def test_in_token_mode_a_peer_link_needs_the_peer_scope_and_its_own_name(
    tmp_path: Path,
) -> None:
    private, public = generate_key_pair("ES256")
    (tmp_path / "vehicle_middleware.pub").write_bytes(public)
    for node in ("a", "b"):
        token = mint(private, subject=node, scope="peer", ttl_s=600)
        (tmp_path / f"{node}.token").write_text(token)
    common = (
        "--auth-mode",
        "token",
        "--token-public-key",
        str(tmp_path / "vehicle_middleware.pub"),
    )
    extra = {n: ("--peer-token-file", str(tmp_path / f"{n}.token")) for n in ("a", "b")}
    with Nodes(["a", "b"], tmp_path, *common, "--sync-interval-s", "0.5", extra=extra) as nodes:
        admin = mint(private, subject="ops", scope="admin", ttl_s=600)
        md = (("authorization", f"Bearer {admin}"),)
        async with grpc.aio.insecure_channel(nodes["a"].address) as channel:
            stub = cluster_pb2_grpc.PeerStub(channel)
            last: list[Any] = []

            async def linked() -> bool:  # the nodes' tokens let their links up
                st = await stub.Status(cluster_pb2.StatusRequest(), metadata=md)
                last[:] = [st]
                return st.peers[0].link == "up" and st.peers[0].inbound

            await eventually_async(linked, timeout=10, what=lambda _: str(last[0]))
            reader = mint(private, subject="b", scope="read:**", ttl_s=600)
            impostor = mint(private, subject="c", scope="peer", ttl_s=600)
            for token, code, words in (
                (reader, grpc.StatusCode.PERMISSION_DENIED, "no 'peer' scope"),
                (impostor, grpc.StatusCode.PERMISSION_DENIED, "speak for node 'b'"),
            ):
                error = await refused_link(stub, (("authorization", f"Bearer {token}"),), "b")
                assert error.code() == code
                assert words in (error.details() or "")
            await fails(
                stub.Status(
                    cluster_pb2.StatusRequest(), metadata=(("authorization", f"Bearer {reader}"),)
                ),
                grpc.StatusCode.PERMISSION_DENIED,
            )
        assert (await status_token(nodes["b"].address, admin)).peers[0].link == "up"


async def test_a_link_refused_for_its_token_says_why_in_cluster_status(tmp_path: Path) -> None:
    """The operator sees the peer's reason (here a token without the ``peer``
    scope), not grpc's own error for a hello written as the peer hung up, nor the
    reason of an earlier try: ``a`` dials ``b`` before ``b`` listens (a refused
    connection, UNAVAILABLE), then ``b`` starts and refuses the link. (The status
    kept the first reason of a link that stayed down: a CI run failed so.)"""
    private, public = generate_key_pair("ES256")
    (tmp_path / "vehicle_middleware.pub").write_bytes(public)
    scopes = {"a": "read:**", "b": "peer"}  # a's token may not speak for a node
    for node, scope in scopes.items():
        (tmp_path / f"{node}.token").write_text(mint(private, subject=node, scope=scope, ttl_s=600))
    common = (
        "--auth-mode",
        "token",
        "--token-public-key",
        str(tmp_path / "vehicle_middleware.pub"),
    )
    extra = {n: ("--peer-token-file", str(tmp_path / f"{n}.token")) for n in scopes}
    admin = mint(private, subject="ops", scope="admin", ttl_s=600)
    nodes = Nodes(["a", "b"], tmp_path, *common, "--sync-interval-s", "0.5", extra=extra)
    try:

        async def link() -> tuple[str, str]:
            peer = (await status_token(nodes["a"].address, admin)).peers[0]
            return peer.link, peer.error.split(":")[0]

        nodes["a"].start()
        await eventually_async(link, ("down", "UNAVAILABLE"))  # b is not listening yet
        nodes["b"].start()
        await eventually_async(link, ("down", "PERMISSION_DENIED"), timeout=30)
        peer = (await status_token(nodes["a"].address, admin)).peers[0]
        assert "no 'peer' scope" in peer.error, peer.error
    finally:
        nodes.stop()


async def refused_link(
    stub: cluster_pb2_grpc.PeerStub, md: tuple[tuple[str, str], ...], node: str
) -> grpc.aio.AioRpcError:
    """Open a Link saying hello as ``node``; the status that ends it.

    The call's own status: a write racing the node's refusal fails with grpc's
    ``INTERNAL`` or ``InvalidStateError`` instead (what the links handle too)."""
    call = stub.Link(metadata=md)
    try:
        await call.write(cluster_pb2.PeerMessage(hello=cluster_pb2.Hello(node_id=node, boot=1)))
        await call.read()
    except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
        return grpc.aio.AioRpcError(
            await call.code(),
            await call.initial_metadata(),
            await call.trailing_metadata(),
            await call.details(),
        )
    raise AssertionError("the link was not refused")


async def status_token(address: str, token: str) -> cluster_pb2.StatusResponse:
    async with grpc.aio.insecure_channel(address) as channel:
        reply: cluster_pb2.StatusResponse = await cluster_pb2_grpc.PeerStub(channel).Status(
            cluster_pb2.StatusRequest(), metadata=(("authorization", f"Bearer {token}"),)
        )
        return reply


async def test_nodes_serving_mutual_tls_link_with_certificates_that_name_them(
    tmp_path: Path,
) -> None:
    car = Authority(tmp_path, "car")
    server = car.server()
    extra = {}
    for node in ("a", "b"):
        client = car.issue(f"{node}-client", node)
        extra[node] = ("--peer-tls-cert", str(client.cert), "--peer-tls-key", str(client.key))
    tls = (
        *("--tls-cert", str(server.cert), "--tls-key", str(server.key)),
        *("--tls-client-ca", str(car.cert), "--peer-tls-ca", str(car.cert)),
    )
    with Nodes(["a", "b"], tmp_path, *tls, "--sync-interval-s", "0.5", extra=extra) as nodes:
        ops = car.issue("ops", "ops")  # a tool's certificate: its name is its identity
        creds = grpc.ssl_channel_credentials(
            car.cert.read_bytes(), ops.key.read_bytes(), ops.cert.read_bytes()
        )
        async with (
            grpc.aio.secure_channel(nodes["a"].address, creds) as to_a,
            grpc.aio.secure_channel(nodes["b"].address, creds) as channel,
        ):
            await vstore_pb2_grpc.VStoreStub(to_a).AddKeys(vstore_pb2.AddKeysRequest(names=[NAME]))
            stub = cluster_pb2_grpc.PeerStub(channel)
            last: list[Any] = []

            async def reached() -> bool:  # the key added on a reached b: the links work over mTLS
                st = await stub.Status(cluster_pb2.StatusRequest())
                last[:] = [st]
                return st.keys == 1 and st.peers[0].link == "up" and st.peers[0].inbound

            await eventually_async(reached, timeout=10, what=lambda _: str(last[0]))
            # A certificate that names another node may not speak for 'a'.
            err = await refused_link(stub, (), "a")
            assert err.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "'ops' may not speak for node 'a'" in (err.details() or "")


async def test_the_provider_sdk_writes_on_a_head_and_says_when_it_moved(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "lock-holder") as p:
        await p.add_keys([NAME])
        await p.get([NAME])
        seen = p.head
        assert await p.set(NAME, b"mine", if_head=seen) == 1
        with pytest.raises(HeadConflictError) as err:
            await p.set(NAME, b"again", if_head=seen)
        assert err.value.head == p.head != seen
        assert (await p.get([NAME]))[NAME].data == b"mine"
