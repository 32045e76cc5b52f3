"""Scopes, in the convention of the KUKSA databroker: what a token allows.

A token's ``scope`` claim is a space-separated list of ``ACTION:GLOB``:

* ``read:GLOB``: subscribe to, get and list the matching keys;
* ``provide:GLOB``: write values of the matching keys (implies ``read``);
* ``create:GLOB``: add and remove the matching keys.

A glob is a dot-separated key pattern whose segments are names, ``*`` (exactly
one segment) or ``**`` (any number of segments, none included):
``Vehicle.Cabin.*`` matches ``Vehicle.Cabin.Temperature`` but not
``Vehicle.Cabin.Seat.Row1``; ``Vehicle.**`` matches ``Vehicle`` and everything
below it; ``**`` matches every key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ACTIONS", "ALL", "Grants", "ScopeError", "compile_glob", "parse_scopes"]

ACTIONS: Final = ("read", "provide", "create")
_SEGMENT: Final = re.compile(r"[A-Za-z0-9_]+|\*\*?", re.ASCII)
_NAME: Final = r"[A-Za-z0-9_]+"


class ScopeError(ValueError):
    """A scope string is malformed."""


def compile_glob(glob: str) -> re.Pattern[str]:
    """A regex matching exactly the key names ``glob`` matches.

    Raises:
        ScopeError: a segment is neither a name, ``*`` nor ``**``.
    """
    parts = glob.split(".")
    if not glob or any(_SEGMENT.fullmatch(p) is None for p in parts):
        raise ScopeError(f"bad key pattern {glob!r}: use dot-separated names, '*' or '**'")
    pattern = ""
    for i, part in enumerate(parts):
        dot = r"\." if i else ""
        if part == "**" and i == 0 and len(parts) > 1:
            # Leading: zero or more segments, each with the dot that follows it.
            pattern += rf"(?:{_NAME}\.)*"
            continue
        if part == "**":
            # Zero or more segments; the dot before them goes with them.
            pattern += rf"(?:{dot}{_NAME}(?:\.{_NAME})*)?"
        elif part == "*":
            pattern += ("" if i == 1 and parts[0] == "**" else dot) + _NAME
        else:
            pattern += ("" if i == 1 and parts[0] == "**" else dot) + re.escape(part)
    return re.compile(pattern, re.ASCII)


@dataclass(frozen=True)
class Grants:
    """What one identity may do, from its scopes."""

    read: tuple[re.Pattern[str], ...] = ()
    provide: tuple[re.Pattern[str], ...] = ()
    create: tuple[re.Pattern[str], ...] = ()
    everything: bool = False
    """Open mode: every action on every key."""
    _cache: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False, repr=False)

    def allows(self, action: str, key: str) -> bool:
        """Whether ``action`` (read, provide, create) is allowed on ``key``. Cached."""
        if self.everything:
            return True
        hit = self._cache.get((action, key))
        if hit is None:
            if action == "read":
                patterns = self.read + self.provide  # provide implies read
            elif action == "provide":
                patterns = self.provide
            else:
                patterns = self.create
            hit = any(p.fullmatch(key) for p in patterns)
            if len(self._cache) < 100_000:
                self._cache[(action, key)] = hit
        return hit


ALL: Final = Grants(everything=True)


def parse_scopes(scope: str) -> Grants:
    """Grants from a space-separated scope string.

    Raises:
        ScopeError: an entry is not ``read:``, ``provide:`` or ``create:``
            followed by a valid key pattern.
    """
    found: dict[str, list[re.Pattern[str]]] = {a: [] for a in ACTIONS}
    for entry in scope.split():
        action, sep, glob = entry.partition(":")
        if not sep or action not in found:
            raise ScopeError(
                f"bad scope {entry!r}: use read:PATTERN, provide:PATTERN or create:PATTERN"
            )
        found[action].append(compile_glob(glob))
    return Grants(tuple(found["read"]), tuple(found["provide"]), tuple(found["create"]))
