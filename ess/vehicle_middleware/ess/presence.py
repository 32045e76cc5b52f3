"""Keys without a provider, pure: claimed once, the claimant gone, nobody claiming since.

A provider may claim the keys it writes (the middleware's write claims). When
its claims end because it went away, its keys are *gone*: their subscribers
are told ``ProviderGone``, and Get and Register say ``no_provider``, until an
app claims them again (``ProviderBack``). A key nobody ever claimed is not
reported: nothing says it should have a provider. Keys are ids; a removed
key is forgotten (its id may be reused).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ProviderPresence"]


class ProviderPresence:
    """The keys whose provider went away, and which provider that was."""

    __slots__ = ("_gone",)

    def __init__(self) -> None:
        self._gone: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._gone)

    def __contains__(self, key: object) -> bool:
        return key in self._gone

    def gone(self, provider: str, keys: Iterable[int]) -> tuple[int, ...]:
        """``provider``'s claims on ``keys`` ended as it went away; returns the
        keys, ascending, each once. O(keys log keys)."""
        out = tuple(sorted(set(keys)))
        for key in out:
            self._gone[key] = provider
        return out

    def back(self, keys: Iterable[int]) -> tuple[int, ...]:
        """``keys`` are claimed again; returns those that were gone, ascending. O(keys)."""
        gone = self._gone
        return tuple(sorted({k for k in keys if gone.pop(k, None) is not None}))

    def forget(self, key: int) -> None:
        """The key was removed. Idempotent. O(1)."""
        self._gone.pop(key, None)

    def provider_of(self, key: int) -> str | None:
        """The provider that went away from ``key``, if it is gone."""
        return self._gone.get(key)

    def check(self) -> None:
        """Assert the invariants (for tests)."""
        for key, provider in self._gone.items():
            assert key > 0, key
            assert provider, key
