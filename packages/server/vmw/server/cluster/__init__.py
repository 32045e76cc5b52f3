"""Several middleware nodes as one vehicle bus: the gRPC side of :mod:`replica`.

Owns the peer links, the node (the replicated model wired to the V-Store and
the journal), the Peer service, ``Set`` with ``if_head`` and ``cluster
status``. Imports the process (``middleware``), ``replica``, ``vstore``, gRPC
and the contract; must not import the analysis (``vmw.fleet``).

- :mod:`vmw.server.cluster.node`: the node's model, wired to the V-Store and the journal;
- :mod:`vmw.server.cluster.tap`: this node's writes become events;
- :mod:`vmw.server.cluster.links`: a link to each peer (dial, hello, send);
- :mod:`vmw.server.cluster.service`: the links peers open here, and Status;
- :mod:`vmw.server.cluster.guarded`: ``Set`` with ``if_head``;
- :mod:`vmw.server.cluster.convert`: the peer protocol's messages;
- :mod:`vmw.tools.cluster_status`: ``python -m vmw.tools cluster-status``.
"""

from vmw.server.cluster.node import ClusterNode

__all__ = ["ClusterNode"]
