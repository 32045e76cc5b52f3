"""The contract between the middleware, its apps and providers, and the fleet side.

Owns what both sides of a wire or a file import, defined once:

- :mod:`vmw.contract.wire`: metadata names and values beyond the ``.proto``
  files, the seq cycle;
- :mod:`vmw.contract.values`: the ``vehicle.value.v1`` value encoding;
- :mod:`vmw.contract.channel`: how a client dials a middleware (keepalive,
  TLS, identity metadata, retry back-off; needs the ``grpc`` extra);
- :mod:`vmw.contract.journal`: the telemetry journal's record format, its
  offsets and hash chain, and the landing area's layout.

The generated gRPC code is :mod:`vmw.proto` and the VSS catalog rules
:mod:`vmw.vss`, in the same distribution (``vmw-contract``). Imports nothing
of the server, the SDK or the fleet side.
"""
