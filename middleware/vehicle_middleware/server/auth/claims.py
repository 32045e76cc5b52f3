"""What a caller may write: its scopes, and the write claims of the keys.

A provider may claim keys when it adds them; while the claim holds, nobody
else may write them. A claim holds while its app has an open stream
(``Publish`` or ``GetEvents``, counted by :mod:`vehicle_middleware.server.auth.stream_counts`,
which tells :class:`WriteClaims` when an app's first stream opens and its last
one ends). A claim made with no stream open, or whose app's last stream ended
to flush (a provider that ended its ``Publish`` stream saying ``flushing``:
``ProviderClient.flush()``), is released after ``grace_s`` unless a stream
opens; a stream that ends otherwise (``close()``, the process died, the
connection dropped) releases the claims at once. Both modes (open and token)
apply them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.permissions import denied
from vehicle_middleware.server.errors import PermissionDeniedError
from vehicle_middleware.vstore import UnknownKeyError

__all__ = ["ClaimsChanged", "WriteClaims"]

log = logging.getLogger(__name__)

ClaimsChanged = Callable[[str, Sequence[str], bool], None]
"""Told ``(app, keys, True)`` when an app claims keys and ``(app, keys, False)``
when its claims end because it went away."""


class WriteClaims:
    """The write claims of one middleware, and the write checks that honour them.

    ``on_claims``: told of every claim and every release (the runtime's provider
    health); None: nobody is told.
    """

    def __init__(self, *, grace_s: float, on_claims: ClaimsChanged | None = None) -> None:
        self._grace_s = grace_s
        self._claims: dict[str, str] = {}  # key name -> claiming app
        self._streaming: set[str] = set()  # apps with an open stream
        self._pending_release: dict[str, asyncio.TimerHandle] = {}
        self.on_claims = on_claims

    # -- checks --------------------------------------------------------------------

    def check_write(self, caller: Caller, key: str, *, field: str = "") -> None:
        """Raise PermissionDeniedError unless ``caller`` may write the key: a
        ``provide`` scope matches it and no other app claims it."""
        if not caller.grants.allows("provide", key):
            raise denied(caller, "provide", key, field=field)
        owner = self._claims.get(key)
        if owner is not None and owner != caller.app:
            raise PermissionDeniedError(
                caller.app, "write", key, f"claimed by {owner!r}", field=field
            )

    def check_write_by_id(
        self, caller: Caller, key: str, key_id: int, index: int, *, field: str = ""
    ) -> None:
        """:meth:`check_write` for a key a request named by its id (``index`` in its batch).

        An id of a key ``caller`` may neither write nor read is answered as an id
        no key has (UnknownKeyError with ``index``): a denial naming the key would
        tell its name and that it exists.
        """
        grants = caller.grants
        if not grants.allows("provide", key) and not grants.allows("read", key):
            error = UnknownKeyError(key_id)
            error.index = index
            raise error
        self.check_write(caller, key, field=field)

    def checks_writes(self, caller: Caller) -> bool:
        """Whether a write by ``caller`` needs per-key checks (the Publish fast path)."""
        return not caller.grants.everything or bool(self._claims)

    def check_claimable(self, caller: Caller, names: Sequence[str]) -> None:
        """Raise PermissionDeniedError if another app claims one of ``names``."""
        for i, name in enumerate(names):
            owner = self._claims.get(name)
            if owner is not None and owner != caller.app:
                raise PermissionDeniedError(
                    caller.app, "claim", name, f"claimed by {owner!r}", field=f"names[{i}]"
                )

    # -- claims --------------------------------------------------------------------

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
        if caller.app not in self._streaming:
            self._release_later(caller.app)

    def claimed_by(self, key: str) -> str | None:
        return self._claims.get(key)

    def forget_key(self, key: str) -> None:
        """A removed key's claim goes with it."""
        self._claims.pop(key, None)

    def release(self, app: str) -> None:
        """End every claim of the app."""
        mine = [k for k, owner in self._claims.items() if owner == app]
        for key in mine:
            del self._claims[key]
        if mine:
            log.info("app %s: its %d claims ended", app, len(mine))
            if self.on_claims is not None:
                self.on_claims(app, mine, False)

    # -- the apps' streams (told by StreamCounts) ---------------------------------

    def streams_began(self, app: str) -> None:
        """The app's first open stream: its claims hold while it has one."""
        self._streaming.add(app)
        timer = self._pending_release.pop(app, None)
        if timer is not None:
            timer.cancel()

    def streams_ended(self, app: str, *, clean: bool) -> None:
        """The app's last stream ended: its claims end at once, or after the
        grace when it ended ``clean`` (to flush, going on)."""
        self._streaming.discard(app)
        if clean:
            self._release_later(app)
        else:
            self.release(app)

    def _release_later(self, app: str) -> None:
        if app in self._pending_release:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pending_release[app] = loop.call_later(self._grace_s, self._release_if_idle, app)

    def _release_if_idle(self, app: str) -> None:
        self._pending_release.pop(app, None)
        if app not in self._streaming:
            self.release(app)

    def shutdown(self) -> None:
        """Cancel the pending releases (the process is stopping)."""
        for timer in self._pending_release.values():
            timer.cancel()
        self._pending_release.clear()
