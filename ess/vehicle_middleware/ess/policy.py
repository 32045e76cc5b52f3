"""The authorization hook: may an app read a key?

Consulted when an app registers a subscription and when a ``key_added`` or
``key_removed`` is broadcast. The default allows everything (the ESS's
authorization row in docs/design.md); the middleware plugs a real policy in.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ALLOW_ALL", "AllowAll", "ReadPolicy"]


class ReadPolicy(Protocol):
    """Decides read access by app id and key name."""

    def may_read(self, app: str, key: str) -> bool:
        """Whether ``app`` may read (and so subscribe to) the key named ``key``."""
        ...


class AllowAll:
    """Every app may read every key."""

    def may_read(self, app: str, key: str) -> bool:
        return True


ALLOW_ALL: ReadPolicy = AllowAll()
