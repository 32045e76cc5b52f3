"""middleware: the vehicle middleware process.

Adapts the pure ``vstore`` and ``ess`` cores to the outside world. Until the
gRPC services land, it holds the in-process demonstration run by ``make demo``
(:mod:`middleware.demo`).
"""
