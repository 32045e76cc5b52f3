"""Access control: who is calling (identity), what it may do (scopes), and write claims.

Owns token verification (``tokens``: RS256/ES256 JWTs) and the scope grammar
and grants (``scopes``). Pure of gRPC: the per-call identity is applied by
``vmw.server.rpc.identity``; must not import the servicers or the runtime.
"""

from vmw.server.auth.scopes import Grants, ScopeError, parse_scopes
from vmw.server.auth.tokens import TokenError, TokenVerifier

__all__ = ["Grants", "ScopeError", "TokenError", "TokenVerifier", "parse_scopes"]
