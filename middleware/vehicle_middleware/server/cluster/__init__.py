"""Several middleware nodes as one vehicle bus: the gRPC side of :mod:`vehicle_middleware.replica`.

Owns the peer links and the node (the replicated model wired to the V-Store
and the journal, built from explicit parts by the runtime). Imports
:mod:`vehicle_middleware.replica`, :mod:`vehicle_middleware.vstore`, gRPC and the contract; must not
import
the servicers (``vehicle_middleware.server.rpc``: the Peer service and ``Set`` with
``if_head`` live there, and use the node), the runtime, or the analysis.

- :mod:`vehicle_middleware.server.cluster.node`: the node's model, wired to the V-Store and the
journal;
- :mod:`vehicle_middleware.server.cluster.tap`: this node's writes become events;
- :mod:`vehicle_middleware.server.cluster.links`: a link to each peer (dial, hello, send);
- :mod:`vehicle_middleware.server.cluster.convert`: the peer protocol's messages.

Served by :mod:`vehicle_middleware.server.rpc.peer_service` (the links peers open here, and
``Status``) and :mod:`vehicle_middleware.server.rpc.ordered_writes` (``Set`` with ``if_head``);
shown by ``python -m vehicle_middleware.tools cluster-status``.
"""

from vehicle_middleware.server.cluster.node import ClusterNode, PeerCredentials

__all__ = ["ClusterNode", "PeerCredentials"]
