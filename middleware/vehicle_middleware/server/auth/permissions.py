"""What a caller's scopes allow it to do with a key, checked where a request names one.

:func:`require` refuses a read, a create (add or remove) or an actuation the
caller's grants do not allow; :func:`require_admin` refuses the middleware's
figures without the ``admin`` scope. A write (``provide``) is also subject to
the write claims: it is checked by
:meth:`vehicle_middleware.server.auth.claims.WriteClaims.check_write`,
which builds its scope denial with :func:`denied`.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.scopes import ADMIN
from vehicle_middleware.server.errors import PermissionDeniedError, ScopeDeniedError

__all__ = ["Action", "denied", "require", "require_admin"]

Action: TypeAlias = Literal["read", "provide", "create", "actuate"]
"""What a scope allows on a key (:mod:`vehicle_middleware.server.auth.scopes`)."""

_VERB: Final[dict[Action, str]] = {
    "read": "read",
    "provide": "write",
    "create": "add or remove",
    "actuate": "actuate",
}


def denied(caller: Caller, action: Action, key: str, *, field: str = "") -> PermissionDeniedError:
    """The refusal of ``action`` on ``key``: no scope of ``caller`` matches it."""
    return PermissionDeniedError(
        caller.app, _VERB[action], key, f"no {action}: scope matches it", field=field
    )


def require(caller: Caller, action: Action, key: str, *, field: str = "") -> None:
    """Raise PermissionDeniedError unless ``caller``'s grants allow ``action`` on the key
    (``field``: where the request named it)."""
    if not caller.grants.allows(action, key):
        raise denied(caller, action, key, field=field)


def require_admin(caller: Caller) -> None:
    """Raise ScopeDeniedError unless ``caller`` may read the middleware's figures
    (open mode, or the ``admin`` scope)."""
    if not (caller.grants.everything or caller.grants.admin):
        raise ScopeDeniedError(caller.app, "read the middleware's figures", ADMIN)
