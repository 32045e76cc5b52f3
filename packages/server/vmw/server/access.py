"""Who may do what: identity, scopes, write claims and rate limits, in one place.

Two modes (``AccessSettings.auth_mode``):

* ``open``: the ``app-id`` metadata is trusted and everything is allowed. For
  development; the middleware says so loudly at start.
* ``token``: every call carries ``authorization: Bearer <JWT>``; the identity
  is the token's subject (an ``app-id`` header, if sent, must match it) and its
  scopes say what it may read, provide and create (:mod:`vmw.server.auth.scopes`).

With mutual TLS (``tls_client_ca``), a call on the TCP listener shows a client
certificate that the CA signed, and the certificate is authoritative: the app
is a name it carries (its subject CN or a SAN, :mod:`vmw.server.tls`). An
``app-id`` header, if sent, must be one of those names (the app when the
certificate has several; else the CN); in token mode the token's subject must
be one too, and the token's scopes still decide what the app may do. In open
mode a certified app may do everything. Calls on the Unix socket show no
certificate and follow the mode's rules alone.

Write claims (both modes): a provider may claim keys when it adds them; while
the claim holds, nobody else may write them. A claim holds while its app has
an open stream (``Publish`` or ``GetEvents``). A claim made with no stream
open, or whose app's last stream ended to flush (a provider that ended its
``Publish`` stream saying ``flushing``: ``ProviderClient.flush()``), is
released after ``claim_grace_s`` unless a stream opens; a stream that ends
otherwise (``close()``, the process died, the connection dropped) releases
the claims at once.

Rate limits (both modes): a token bucket per app for calls and stream opens,
and one per ``Publish`` stream for its messages.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from vmw.contract.wire import APP_ID_HEADER, AUTH_HEADER
from vmw.server.auth.scopes import ADMIN, ALL, Grants
from vmw.server.auth.tokens import Claims, TokenError, TokenVerifier
from vmw.server.config import AccessSettings
from vmw.server.errors import (
    LimitExceededError,
    PermissionDeniedError,
    ScopeDeniedError,
    UnauthenticatedError,
)
from vmw.vstore import UnknownKeyError

__all__ = ["Access", "Caller", "PublishPace", "TokenBucket"]

log = logging.getLogger(__name__)

_APP_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)
_MAX_BUCKETS: Final = 10_000
_MAX_TOKEN_BYTES: Final = 8192


class PublishPace:
    """One provider stream's messages per second (``publish_messages_per_s``, burst
    ``publish_burst``)."""

    __slots__ = ("_app", "_bucket")

    def __init__(self, app: str, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self._app = app
        self._bucket = TokenBucket(rate, burst, clock)

    def take(self, written: int) -> None:
        """One more message; ``written``: the batches of the stream written so far.

        Raises:
            LimitExceededError: the stream sends faster than its limit.
        """
        if not self._bucket.take():
            b = self._bucket
            raise LimitExceededError(
                "Publish messages/s",
                b.rate,
                f"app {self._app!r} sent more than {b.rate:g} messages/s (burst {b.burst:g}) "
                f"on one stream; {written} batches were written",
            )


@dataclass(frozen=True)
class Caller:
    """An authenticated caller."""

    app: str
    grants: Grants
    expires_at: float | None = None
    """When its token expires (seconds since the epoch); None in open mode."""


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


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up."""

    __slots__ = ("_clock", "_last", "_tokens", "burst", "rate")

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def take(self, n: float = 1.0) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= n:
            self._tokens -= n
            return True
        return False

    @property
    def full(self) -> bool:
        return self._tokens + (self._clock() - self._last) * self.rate >= self.burst


class Access:
    """Authentication, authorization, claims and rate limits of one middleware."""

    def __init__(
        self, settings: AccessSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._verifier: TokenVerifier | None = None
        if settings.auth_mode == "token":
            self._verifier = TokenVerifier.from_file(
                Path(settings.token_public_key),
                audience=settings.token_audience or None,
                leeway_s=settings.token_leeway_s,
            )
        self._stream_grants: dict[str, Grants] = {}  # app -> grants of its event stream's token
        self._calling: Caller | None = None  # set around ESS.register
        self._buckets: dict[str, TokenBucket] = {}
        self._peer_buckets: dict[str, TokenBucket] = {}
        self._tokens: OrderedDict[str, Claims] = OrderedDict()  # verified tokens, LRU
        self._claims: dict[str, str] = {}  # key name -> claiming app
        self._streams: Counter[str] = Counter()  # open streams per app
        self._publish_streams: Counter[str] = Counter()
        self._pending_release: dict[str, asyncio.TimerHandle] = {}
        self.on_claims: Callable[[str, Sequence[str], bool], None] | None = None
        """Told ``(app, keys, True)`` when an app claims keys and ``(app, keys, False)``
        when its claims end because it went away (the runtime's provider health)."""

    @property
    def open_mode(self) -> bool:
        return self._verifier is None

    @property
    def mutual_tls(self) -> bool:
        """TCP callers show client certificates that name their app."""
        return bool(self._settings.tls_client_ca)

    # -- identity ------------------------------------------------------------------

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
        self._admit_peer(peer)
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
            caller = self._from_token(metadata, app_id)
            if certified is not None and caller.app not in certified:
                raise UnauthenticatedError(
                    f"the token's subject {caller.app!r} is not named by the client certificate "
                    f"({_show_names(certified)})"
                )
        self.admit(caller.app)
        return caller

    def _admit_peer(self, peer: str) -> None:
        # A Unix socket's callers all show the same peer ("unix:..."): one bucket
        # would make every app on it share one limit. There each app's own applies.
        if peer and not peer.startswith("unix:"):
            s = self._settings
            rate = s.rate_limit_rps * 2  # several apps may share a connection
            self._take(self._peer_buckets, peer, rate, s.rate_limit_burst * 2, f"connection {peer}")

    def _from_token(
        self, metadata: Sequence[tuple[str, str | bytes]], app_id: str | None
    ) -> Caller:
        assert self._verifier is not None
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
                claims = self._verifier.verify(token)
            except TokenError as e:
                raise UnauthenticatedError(f"token refused: {e}") from e
            self._tokens[token] = claims  # the same Grants object: its match cache lasts
            if len(self._tokens) > 1024:
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

    def admit(self, app: str) -> None:
        """Take one request from the app's bucket, or raise LimitExceededError."""
        s = self._settings
        self._take(self._buckets, app, s.rate_limit_rps, s.rate_limit_burst, f"app {app!r}")

    def _take(
        self, buckets: dict[str, TokenBucket], name: str, rate: float, burst: int, who: str
    ) -> None:
        bucket = buckets.get(name)
        if bucket is None:
            if len(buckets) >= _MAX_BUCKETS:  # forget the idle ones: their buckets are full
                for idle in [n for n, b in buckets.items() if b.full]:
                    del buckets[idle]
            bucket = buckets[name] = TokenBucket(rate, burst, self._clock)
        if not bucket.take():
            raise LimitExceededError(
                "rate limit",
                rate,
                f"{who} sent more than {rate:g} requests/s (burst {burst}); slow down and retry",
            )

    def publish_pace(self, app: str) -> PublishPace:
        """The message rate of one new provider stream of ``app`` (own Publish, KUKSA's
        OpenProviderStream: the same limit)."""
        s = self._settings
        return PublishPace(app, s.publish_messages_per_s, s.publish_burst, self._clock)

    # -- authorization -------------------------------------------------------------

    def may_read(self, app: str, key: str) -> bool:
        """The ESS's read policy: register and lifecycle broadcast consult it.

        What the token of the app's event stream allows; during a Register call,
        also what the token of that call allows (both must).
        """
        grants = self._stream_grants.get(app)
        if grants is None:
            return self.open_mode
        if not grants.allows("read", key):
            return False
        calling = self._calling
        return calling is None or calling.app != app or calling.grants.allows("read", key)

    @contextmanager
    def calling(self, caller: Caller) -> Iterator[None]:
        """Inside, ``may_read`` also requires ``caller``'s own grants."""
        self._calling = caller
        try:
            yield
        finally:
            self._calling = None

    def stream_grants(self, app: str, grants: Grants | None) -> None:
        """The grants of the app's event stream (None: the stream is gone)."""
        if grants is None:
            self._stream_grants.pop(app, None)
        else:
            self._stream_grants[app] = grants

    def check(self, caller: Caller, action: str, key: str, *, field: str = "") -> None:
        """Raise PermissionDeniedError unless ``caller`` may ``action`` the key.

        ``provide`` also honours write claims.
        """
        if not caller.grants.allows(action, key):
            verb = {
                "read": "read",
                "provide": "write",
                "create": "add or remove",
                "actuate": "actuate",
            }[action]
            raise PermissionDeniedError(
                caller.app, verb, key, f"no {action}: scope matches it", field=field
            )
        if action == "provide":
            owner = self._claims.get(key)
            if owner is not None and owner != caller.app:
                raise PermissionDeniedError(
                    caller.app, "write", key, f"claimed by {owner!r}", field=field
                )

    def check_by_id(
        self, caller: Caller, action: str, key: str, key_id: int, index: int, *, field: str = ""
    ) -> None:
        """:meth:`check` for a key a request named by its id (``index`` in its batch).

        An id of a key ``caller`` may neither ``action`` nor read is answered as an
        id no key has (UnknownKeyError with ``index``): a denial naming the key would
        tell its name and that it exists.
        """
        grants = caller.grants
        if not grants.allows(action, key) and not grants.allows("read", key):
            error = UnknownKeyError(key_id)
            error.index = index
            raise error
        self.check(caller, action, key, field=field)

    def check_admin(self, caller: Caller) -> None:
        """Raise ScopeDeniedError unless ``caller`` may read the middleware's figures
        (open mode, or the ``admin`` scope)."""
        if not (caller.grants.everything or caller.grants.admin):
            raise ScopeDeniedError(caller.app, "read the middleware's figures", ADMIN)

    def checks_writes(self, caller: Caller) -> bool:
        """Whether a write by ``caller`` needs per-key checks (the Publish fast path)."""
        return not caller.grants.everything or bool(self._claims)

    # -- claims --------------------------------------------------------------------

    def check_claimable(self, caller: Caller, names: Sequence[str]) -> None:
        """Raise PermissionDeniedError if another app claims one of ``names``."""
        for i, name in enumerate(names):
            owner = self._claims.get(name)
            if owner is not None and owner != caller.app:
                raise PermissionDeniedError(
                    caller.app, "claim", name, f"claimed by {owner!r}", field=f"names[{i}]"
                )

    def claim(self, caller: Caller, names: Sequence[str]) -> None:
        """Claim keys for ``caller``; all or nothing.

        Raises:
            PermissionDeniedError: a key is claimed by another app.
        """
        self.check_claimable(caller, names)
        for name in names:
            self._claims[name] = caller.app
        log.info("app %s claimed %d keys", caller.app, len(names))
        if self.on_claims is not None:
            self.on_claims(caller.app, names, True)
        if not self._streams[caller.app]:
            self._release_later(caller.app)

    def claimed_by(self, key: str) -> str | None:
        return self._claims.get(key)

    def forget_key(self, key: str) -> None:
        """A removed key's claim goes with it."""
        self._claims.pop(key, None)

    def _release_later(self, app: str) -> None:
        if app in self._pending_release:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pending_release[app] = loop.call_later(
            self._settings.claim_grace_s, self._release_if_idle, app
        )

    def _release_if_idle(self, app: str) -> None:
        self._pending_release.pop(app, None)
        if not self._streams[app]:
            self.release(app)

    def release(self, app: str) -> None:
        """End every claim of the app."""
        mine = [k for k, owner in self._claims.items() if owner == app]
        for key in mine:
            del self._claims[key]
        if mine:
            log.info("app %s: its %d claims ended", app, len(mine))
            if self.on_claims is not None:
                self.on_claims(app, mine, False)

    # -- streams -------------------------------------------------------------------

    def stream_opened(self, app: str, *, publish: bool = False) -> None:
        """Count a stream; refuse a Publish stream beyond the per-app limit."""
        if publish:
            limit = self._settings.max_publish_streams_per_app
            if self._publish_streams[app] >= limit:
                raise LimitExceededError(
                    "Publish streams",
                    limit,
                    f"app {app!r} already has {self._publish_streams[app]} open",
                )
            self._publish_streams[app] += 1
        self._streams[app] += 1
        timer = self._pending_release.pop(app, None)
        if timer is not None:
            timer.cancel()

    def publish_stream_count(self) -> int:
        """Open Publish streams, all apps together (for the metrics)."""
        return sum(self._publish_streams.values())

    def stream_closed(self, app: str, *, publish: bool = False, clean: bool = False) -> None:
        """Uncount a stream; the app's last stream ending ends its claims: at once,
        or after ``claim_grace_s`` when it ended ``clean`` (to flush, going on)."""
        if publish:
            self._publish_streams[app] -= 1
            if self._publish_streams[app] <= 0:
                del self._publish_streams[app]
        self._streams[app] -= 1
        if self._streams[app] <= 0:
            del self._streams[app]
            if clean:
                self._release_later(app)
            else:
                self.release(app)

    def shutdown(self) -> None:
        for timer in self._pending_release.values():
            timer.cancel()
        self._pending_release.clear()
