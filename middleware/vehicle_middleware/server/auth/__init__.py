"""Access control, one module per concern.

Who is calling (``authentication``: identity from metadata, tokens and client
certificates), how fast it may call (``rate_limits``), what its scopes allow
(``permissions``; the scope grammar and grants in ``scopes``, token
verification in ``tokens``), what it may read through the ESS
(``read_policy``), what it may write and claim (``claims``), and how many
streams each app has open (``stream_counts``). Pure of gRPC: the per-call
identity is applied by ``vehicle_middleware.server.rpc.identity``; the composition root
(``vehicle_middleware.server.runtime``) builds the parts and hands each component the ones it
uses. Must not import the servicers or the runtime.
"""

from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.permissions import require, require_admin
from vehicle_middleware.server.auth.rate_limits import PublishPace, RateLimits, TokenBucket
from vehicle_middleware.server.auth.read_policy import StreamReadPolicy
from vehicle_middleware.server.auth.scopes import Grants, ScopeError, parse_scopes
from vehicle_middleware.server.auth.stream_counts import StreamCounts
from vehicle_middleware.server.auth.tokens import TokenError, TokenVerifier

__all__ = [
    "Authenticator",
    "Caller",
    "Grants",
    "PublishPace",
    "RateLimits",
    "ScopeError",
    "StreamCounts",
    "StreamReadPolicy",
    "TokenBucket",
    "TokenError",
    "TokenVerifier",
    "WriteClaims",
    "parse_scopes",
    "require",
    "require_admin",
]
