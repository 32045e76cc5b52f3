"""Several middleware nodes as one vehicle bus: the gRPC side of :mod:`replica`.

Owns the peer links, the node (the replicated model wired to the V-Store and
the journal), the Peer service, ``Set`` with ``if_head`` and ``cluster
status``. Imports the process (``middleware``), ``replica``, ``vstore``, gRPC
and the contract; must not import the analysis (``telemetry_export``).

- :mod:`middleware.cluster.node`: the node's model, wired to the V-Store and the journal;
- :mod:`middleware.cluster.tap`: this node's writes become events;
- :mod:`middleware.cluster.links`: a link to each peer (dial, hello, send);
- :mod:`middleware.cluster.service`: the links peers open here, and Status;
- :mod:`middleware.cluster.guarded`: ``Set`` with ``if_head``;
- :mod:`middleware.cluster.convert`: the peer protocol's messages;
- :mod:`middleware.cluster.cli`: ``python -m middleware cluster status``.
"""

from middleware.cluster.node import ClusterNode

__all__ = ["ClusterNode"]
