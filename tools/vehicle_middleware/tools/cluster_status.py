"""``python -m vehicle_middleware.tools cluster-status``: a node's view of the cluster, for a
person.

Prints the node (id, head, digest, keys), then a line per peer: its link,
for how long, whether its own link to this node is open, events sent and
received, the last of each, the events it has not confirmed and what was
refused from it. Nodes agree when their digests are equal. ``--json`` prints
the same as JSON (for scripts). Exits 1 when the middleware cannot be
reached or refuses the call, with one line saying why.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import grpc
from google.protobuf.json_format import MessageToDict
from vehicle_middleware.contract.channel import Tls, metadata, open_channel
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2, cluster_pb2_grpc

__all__ = ["format_status", "status_command"]


def _short(text: str) -> str:
    return text[:12] if text else "-"


def _ref(ref: cluster_pb2.EventRef, now_ns: int) -> str:
    if not ref.origin:
        return "-"
    return f"{ref.origin}#{ref.seq} ({max(0.0, (now_ns - ref.stamp) / 1e9):.1f} s ago)"


def format_status(st: cluster_pb2.StatusResponse, now_ns: int | None = None) -> str:
    """The status as lines of text."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    lines = [
        f"node {st.node_id or '(no node id)'}  head {_short(st.head)}  digest {_short(st.digest)}"
        f"  keys {st.keys}",
    ]
    if not st.peers:
        lines.append("no peers: a single node")
        return "\n".join(lines)
    refused = ", ".join(f"{k} {v}" for k, v in sorted(st.refused.items())) or "none"
    lines.append(
        f"max_confirms {st.max_confirms}  applied {st.applied}  superseded {st.superseded}  "
        f"pending {st.pending}  guarded {st.guards}  retained {st.retained} "
        f"({st.retained_bytes:,} bytes)  refused: {refused}"
    )
    header = (
        f"{'peer':<16} {'address':<22} {'link':<11} {'for':>7} {'in':<3} {'sent':>8} "
        f"{'received':>8} {'unconfirmed':>11}  last sent / last received"
    )
    lines.append(header)
    for p in st.peers:
        lines.append(
            f"{p.name:<16} {p.address:<22} {p.link:<11} {p.since_s:>6.1f}s "
            f"{'yes' if p.inbound else 'no':<3} {p.sent:>8} {p.received:>8} "
            f"{p.unconfirmed:>11}  {_ref(p.last_sent, now_ns)} / {_ref(p.last_received, now_ns)}"
        )
        if p.refused:
            lines.append(
                "  refused from it: " + ", ".join(f"{k} {v}" for k, v in sorted(p.refused.items()))
            )
        if p.link == "down" and p.error:
            lines.append(f"  down: {p.error}")
    return "\n".join(lines)


async def fetch_status(
    target: str, app_id: str, token: str | None, timeout: float = 10.0, *, tls: Tls | None = None
) -> cluster_pb2.StatusResponse:
    async with open_channel(target, tls=tls) as channel:
        stub = cluster_pb2_grpc.PeerStub(channel)
        response: cluster_pb2.StatusResponse = await stub.Status(
            cluster_pb2.StatusRequest(), metadata=metadata(app_id, token), timeout=timeout
        )
        return response


def status_command(
    target: str, app_id: str, token: str | None, *, as_json: bool, tls: Tls | None = None
) -> int:
    """Print the node's status (``tls``: dial with TLS); the exit status."""
    try:
        st = asyncio.run(fetch_status(target, app_id, token, tls=tls))
    except grpc.aio.AioRpcError as e:
        print(
            f"vehicle_middleware.tools cluster-status: {target}: {e.code().name}: {e.details()}",
            file=sys.stderr,
        )
        return 1
    if as_json:
        print(json.dumps(MessageToDict(st, preserving_proto_field_name=True), indent=2))
    else:
        print(format_status(st))
    return 0
