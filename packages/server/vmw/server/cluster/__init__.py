"""Several middleware nodes as one vehicle bus: the gRPC side of :mod:`vmw.replica`.

Owns the peer links and the node (the replicated model wired to the V-Store
and the journal, built from explicit parts by the runtime). Imports
:mod:`vmw.replica`, :mod:`vmw.vstore`, gRPC and the contract; must not import
the servicers (``vmw.server.rpc``: the Peer service and ``Set`` with
``if_head`` live there, and use the node), the runtime, or the analysis.

- :mod:`vmw.server.cluster.node`: the node's model, wired to the V-Store and the journal;
- :mod:`vmw.server.cluster.tap`: this node's writes become events;
- :mod:`vmw.server.cluster.links`: a link to each peer (dial, hello, send);
- :mod:`vmw.server.cluster.convert`: the peer protocol's messages.

Served by :mod:`vmw.server.rpc.peer_service` (the links peers open here, and
``Status``) and :mod:`vmw.server.rpc.guarded` (``Set`` with ``if_head``);
shown by ``python -m vmw.tools cluster-status``.
"""

from vmw.server.cluster.node import ClusterNode, PeerCredentials

__all__ = ["ClusterNode", "PeerCredentials"]
