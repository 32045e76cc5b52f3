"""Access control: who is calling (identity), what it may do (scopes), and write claims."""

from middleware.auth.scopes import Grants, ScopeError, parse_scopes
from middleware.auth.tokens import TokenError, TokenVerifier

__all__ = ["Grants", "ScopeError", "TokenError", "TokenVerifier", "parse_scopes"]
