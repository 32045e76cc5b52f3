"""Operators' command-line views of a running middleware (``python -m vehicle_middleware.tools``).

``top`` (:mod:`vehicle_middleware.tools.top`) and ``cluster-status``
(:mod:`vehicle_middleware.tools.cluster_status`) are clients like any app: they speak the
public Admin and Cluster services and import nothing of the server.

Owns the rendering of those views; the channel, TLS and token options come
from the SDK (:mod:`vehicle_middleware.sdk.cli`).
"""
