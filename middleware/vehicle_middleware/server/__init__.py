"""vehicle_middleware.server: the vehicle middleware process.

Owns everything that runs in it, as thin adapters around the pure cores
(:mod:`vehicle_middleware.vstore`, :mod:`vehicle_middleware.ess`, :mod:`vehicle_middleware.replica`,
and :mod:`vehicle_middleware.vss`
from the contract): the settings (``config``), the parts and the composition
root (``runtime``, ``server``), a subscriber stream's lifecycle and delivery loop (``session``),
the gRPC services (``rpc``, ``kuksa``, ``cluster``), identity, scopes, write
claims and rate limits (``auth``), the journal writer and its services (``journal``),
metrics (``metrics``), health, TLS, the CLI.

Imports the contract (:mod:`vehicle_middleware.contract`, :mod:`vehicle_middleware.proto`); must not
import
the SDK, the tools, the samples or the fleet side (``tests/unit/test_layout.py``).
"""
