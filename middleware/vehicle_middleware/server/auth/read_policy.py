"""What an app may read through the ESS: the grants of its event stream's token.

:class:`StreamReadPolicy` is the ESS's read policy (:class:`vehicle_middleware.ess.ReadPolicy`):
consulted when an app registers a subscription and when a key's lifecycle is
broadcast. An app may read what the token of its open event stream allows;
during a ``Register`` (or a KUKSA ``Subscribe``) call, what that call's token
allows too (:meth:`StreamReadPolicy.calling`). In open mode an app with no
stream's grants recorded may read everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.scopes import Grants

__all__ = ["StreamReadPolicy"]


class StreamReadPolicy:
    """The ESS's read policy of one middleware (see the module)."""

    def __init__(self, *, open_mode: bool) -> None:
        self._open_mode = open_mode
        self._stream_grants: dict[str, Grants] = {}  # app -> grants of its event stream's token
        self._calling: Caller | None = None  # set around ESS.register

    def may_read(self, app: str, key: str) -> bool:
        """The ESS's read policy: register and lifecycle broadcast consult it.

        What the token of the app's event stream allows; during a Register call,
        also what the token of that call allows (both must).
        """
        grants = self._stream_grants.get(app)
        if grants is None:
            return self._open_mode
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
