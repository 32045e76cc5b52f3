"""The contract between the middleware, its apps and providers, and the fleet side.

Owns what both sides of a wire or a file import, defined once:

- :mod:`vehicle_middleware.contract.wire`: metadata names and values beyond the ``.proto``
  files, the seq cycle;
- :mod:`vehicle_middleware.contract.values`: the ``vehicle.value.v1`` value encoding;
- :mod:`vehicle_middleware.contract.channel`: how a client dials a middleware (keepalive,
  TLS, identity metadata, retry back-off; needs the ``grpc`` extra);
- :mod:`vehicle_middleware.contract.journal`: the telemetry journal's record format, its
  offsets and hash chain, and the landing area's layout.

The generated gRPC code is :mod:`vehicle_middleware.proto` and the VSS catalog rules
:mod:`vehicle_middleware.vss`, in the same distribution (``vehicle-middleware-contract``). Imports
nothing
of the server, the SDK or the fleet side.
"""
