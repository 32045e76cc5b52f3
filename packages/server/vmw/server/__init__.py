"""vmw.server: the vehicle middleware process.

Owns everything that runs in it, as thin adapters around the pure cores
(:mod:`vmw.vstore`, :mod:`vmw.ess`, :mod:`vmw.replica`, and :mod:`vmw.vss`
from the contract): the settings (``config``), the parts and the composition
root (``runtime``, ``server``), a subscriber stream's lifecycle and delivery loop (``session``),
the gRPC services (``rpc``, ``kuksa``, ``cluster``), identity, scopes, write
claims and rate limits (``auth``), the journal writer and its services (``journal``),
metrics (``metrics``), health, TLS, the CLI.

Imports the contract (:mod:`vmw.contract`, :mod:`vmw.proto`); must not import
the SDK, the tools, the samples or the fleet side (``tests/unit/test_layout.py``).
"""
