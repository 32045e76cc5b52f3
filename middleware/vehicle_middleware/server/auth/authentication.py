"""Who is calling: a call's metadata (and client certificate) made a :class:`Caller`.

Two modes (``Settings.auth_mode``):

* ``open``: the ``app-id`` metadata is trusted and everything is allowed. For
  development; the middleware says so loudly at start.
* ``token``: every call carries ``authorization: Bearer <JWT>``; the identity
  is the token's subject (an ``app-id`` header, if sent, must match it) and its
  scopes say what it may read, provide and create (:mod:`vehicle_middleware.server.auth.scopes`).

With mutual TLS (``tls_client_ca``), a call on the TCP listener shows a client
certificate that the CA signed, and the certificate is authoritative: the app
is a name it carries (its subject CN or a SAN, :mod:`vehicle_middleware.server.tls`). An
``app-id`` header, if sent, must be one of those names (the app when the
certificate has several; else the CN); in token mode the token's subject must
be one too, and the token's scopes still decide what the app may do. In open
mode a certified app may do everything. Calls on the Unix socket show no
certificate and follow the mode's rules alone.

Every call is admitted by its rate limits (:mod:`vehicle_middleware.server.auth.rate_limits`):
its connection's before its identity is checked, then its app's.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from vehicle_middleware.contract.wire import APP_ID_HEADER, AUTH_HEADER
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.auth.scopes import ALL, Grants
from vehicle_middleware.server.auth.tokens import Claims, TokenError, TokenVerifier
from vehicle_middleware.server.config import AccessSettings
from vehicle_middleware.server.errors import UnauthenticatedError

__all__ = ["Authenticator", "Caller"]

_APP_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)
_MAX_TOKEN_BYTES: Final = 8192
_MAX_CACHED_TOKENS: Final = 1024


@dataclass(frozen=True)
class Caller:
    """An authenticated caller."""

    app: str
    grants: Grants
    expires_at: float | None = None
    """When its token expires (seconds since the epoch); None in open mode."""
    pooled: bool = False
    """An identity that clients the middleware cannot tell apart share: in open mode,
    every KUKSA client that sends no ``app-id``. The per-app shares of the event path
    do not apply to it (one share would be split among unknown clients); the
    middleware-wide limits do."""


def _show_names(names: Sequence[str]) -> str:
    return "names: " + ", ".join(repr(n) for n in names[:5]) if names else "it names nothing"


def _certified_app(names: Sequence[str], app_id: str | None) -> str:
    """The app a client certificate stands for: ``app_id`` if it names it, else its
    first valid name (the subject CN, else the first SAN).

    Raises:
        UnauthenticatedError: ``app_id`` is not among the names, or none is an app id.
    """
    if app_id is not None:
        if app_id not in names:
            raise UnauthenticatedError(
                f"'{APP_ID_HEADER}' {app_id!r} is not named by the client certificate "
                f"({_show_names(names)})"
            )
        return app_id
    for name in names:
        if _APP_ID.fullmatch(name) is not None:
            return name
    raise UnauthenticatedError(
        "the client certificate names no app: its subject CN or a SAN must be an app id "
        f"(1 to 64 characters of [A-Za-z0-9_.-]; {_show_names(names)})"
    )


class Authenticator:
    """The identity rules of one middleware (see the module).

    ``verifier``: the token mode's (None: open mode). ``mutual_tls``: TCP callers
    show client certificates that name their app.
    """

    def __init__(
        self, limits: RateLimits, *, verifier: TokenVerifier | None, mutual_tls: bool
    ) -> None:
        self._limits = limits
        self._verifier = verifier
        self._mutual_tls = mutual_tls
        self._tokens: OrderedDict[str, Claims] = OrderedDict()  # verified tokens, LRU

    @classmethod
    def of(cls, settings: AccessSettings, limits: RateLimits) -> Authenticator:
        """The rules ``settings`` set: ``auth_mode`` (in token mode, the key file
        ``token_public_key`` is read now), ``tls_client_ca``.

        Raises:
            OSError, ValueError: the token mode's key cannot be read or is no key.
        """
        verifier = None
        if settings.auth_mode == "token":
            verifier = TokenVerifier.from_file(
                Path(settings.token_public_key),
                audience=settings.token_audience or None,
                leeway_s=settings.token_leeway_s,
            )
        return cls(limits, verifier=verifier, mutual_tls=bool(settings.tls_client_ca))

    @property
    def open_mode(self) -> bool:
        return self._verifier is None

    @property
    def mutual_tls(self) -> bool:
        """TCP callers show client certificates that name their app."""
        return self._mutual_tls

    def authenticate(
        self,
        metadata: Sequence[tuple[str, str | bytes]],
        peer: str = "",
        *,
        certified: Sequence[str] | None = None,
    ) -> Caller:
        """The caller of a call with this metadata, admitted by its rate limits.

        A connection's requests are limited before its identity is checked
        (so floods of bad tokens cost little), then the app's. ``certified``:
        the names of the call's verified client certificate (mutual TLS), which
        then decide the app (see the module's docstring); None: no certificate.

        Raises:
            UnauthenticatedError: missing, malformed or refused identity.
            LimitExceededError: the connection's or the app's request rate is exceeded.
        """
        self._limits.admit_peer(peer)
        app_ids = [v for k, v in metadata if k == APP_ID_HEADER]
        if len(app_ids) > 1:
            raise UnauthenticatedError(f"'{APP_ID_HEADER}' metadata given {len(app_ids)} times")
        app_id = app_ids[0] if app_ids else None
        if app_id is not None and (
            not isinstance(app_id, str) or _APP_ID.fullmatch(app_id) is None
        ):
            raise UnauthenticatedError(
                f"malformed '{APP_ID_HEADER}' metadata: 1 to 64 characters of [A-Za-z0-9_.-]"
            )
        if certified is not None and self._verifier is None:
            app_id = _certified_app(certified, app_id)
        if self._verifier is None:
            if app_id is None:
                raise UnauthenticatedError(
                    f"missing '{APP_ID_HEADER}' metadata: every call must say which app it is"
                )
            caller = Caller(app_id, ALL)
        else:
            caller = self._from_token(self._verifier, metadata, app_id)
            if certified is not None and caller.app not in certified:
                raise UnauthenticatedError(
                    f"the token's subject {caller.app!r} is not named by the client certificate "
                    f"({_show_names(certified)})"
                )
        self._limits.admit(caller.app)
        return caller

    def _from_token(
        self,
        verifier: TokenVerifier,
        metadata: Sequence[tuple[str, str | bytes]],
        app_id: str | None,
    ) -> Caller:
        values = [v for k, v in metadata if k == AUTH_HEADER]
        if len(values) != 1 or not isinstance(values[0], str):
            raise UnauthenticatedError(
                f"missing '{AUTH_HEADER}' metadata: send 'Bearer <token>' (auth mode is token)"
            )
        scheme, _, token = values[0].partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthenticatedError(f"'{AUTH_HEADER}' metadata must be 'Bearer <token>'")
        token = token.strip()
        if len(token) > _MAX_TOKEN_BYTES:
            raise UnauthenticatedError(f"token refused: longer than {_MAX_TOKEN_BYTES} bytes")
        claims = self._tokens.get(token)
        if claims is not None and claims.expires_at <= time.time():
            claims = None
            del self._tokens[token]
        if claims is None:
            try:
                claims = verifier.verify(token)
            except TokenError as e:
                raise UnauthenticatedError(f"token refused: {e}") from e
            self._tokens[token] = claims  # the same Grants object: its match cache lasts
            if len(self._tokens) > _MAX_CACHED_TOKENS:
                self._tokens.popitem(last=False)
        else:
            self._tokens.move_to_end(token)
        if _APP_ID.fullmatch(claims.subject) is None:
            raise UnauthenticatedError("token subject is not a valid app id ([A-Za-z0-9_.-]{1,64})")
        if app_id is not None and app_id != claims.subject:
            raise UnauthenticatedError(
                f"'{APP_ID_HEADER}' {app_id!r} does not match the token's subject "
                f"{claims.subject!r}"
            )
        return Caller(claims.subject, claims.grants, claims.expires_at)
