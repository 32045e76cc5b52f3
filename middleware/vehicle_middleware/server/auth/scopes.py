"""Scopes, in the convention of the KUKSA databroker: what a token allows.

A token's ``scope`` claim is a space-separated list of ``ACTION:GLOB``:

* ``read:GLOB``: subscribe to, get and list the matching keys;
* ``provide:GLOB``: write values of the matching keys (implies ``read``);
* ``create:GLOB``: add and remove the matching keys;
* ``actuate:GLOB``: ask the provider of the matching actuators to set them
  (KUKSA ``Actuate``, ``BatchActuate``, v1 ``Set`` of a target);
* ``admin`` (no pattern): read the middleware's figures (``Admin/GetStats``,
  ``python -m vehicle_middleware.tools top``), which name every app and key.
* ``peer`` (no pattern): be another middleware node of the vehicle (open a
  peer ``Link``; read ``cluster status``); a node's token has it.
* ``journal:read`` (no pattern): consume the telemetry journal
  (``JournalService``: register, poll, follow), which names every app and key.

An action without ``:GLOB`` (``read``, as KUKSA tokens say it) is the action
on every key (``read:**``).

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

__all__ = [
    "ACTIONS",
    "ADMIN",
    "ALL",
    "JOURNAL_READ",
    "PEER",
    "Glob",
    "Grants",
    "ScopeError",
    "compile_glob",
    "parse_scopes",
]

ACTIONS: Final = ("read", "provide", "create", "actuate")
"""The actions on keys; each scope entry is one, with a key pattern."""
ADMIN: Final = "admin"
"""The scope that reads the middleware's figures; it names no keys."""
PEER: Final = "peer"
"""The scope of another middleware node (the peer protocol); it names no keys."""
JOURNAL_READ: Final = "journal:read"
"""The scope that consumes the journal (JournalService); it names no keys."""
_SEGMENT: Final = re.compile(r"[A-Za-z0-9_]+|\*\*?", re.ASCII)


class ScopeError(ValueError):
    """A scope string is malformed."""


class Glob:
    """A compiled key pattern. Matching is linear in the pattern and name lengths
    (segment by segment, no regex backtracking), whatever the ``**``s."""

    __slots__ = ("_parts", "text")

    def __init__(self, text: str) -> None:
        parts = text.split(".")
        if not text or any(_SEGMENT.fullmatch(p) is None for p in parts):
            raise ScopeError(f"bad key pattern {text!r}: use dot-separated names, '*' or '**'")
        collapsed: list[str] = []
        for p in parts:
            if not (p == "**" and collapsed and collapsed[-1] == "**"):
                collapsed.append(p)
        self.text = text
        self._parts = tuple(collapsed)

    def matches(self, name: str) -> bool:
        segments = name.split(".")
        n = len(segments)
        reachable = {0}  # how many segments the pattern so far can have consumed
        for part in self._parts:
            if part == "**":
                reachable = set(range(min(reachable), n + 1))
            else:
                reachable = {
                    i + 1 for i in reachable if i < n and (part == "*" or segments[i] == part)
                }
            if not reachable:
                return False
        return n in reachable

    def __repr__(self) -> str:
        return f"Glob({self.text!r})"


def compile_glob(glob: str) -> Glob:
    """The matcher of ``glob``.

    Raises:
        ScopeError: a segment is neither a name, ``*`` nor ``**``.
    """
    return Glob(glob)


@dataclass(frozen=True)
class Grants:
    """What one identity may do, from its scopes."""

    read: tuple[Glob, ...] = ()
    provide: tuple[Glob, ...] = ()
    create: tuple[Glob, ...] = ()
    actuate: tuple[Glob, ...] = ()
    everything: bool = False
    """Open mode: every action on every key."""
    admin: bool = False
    """The ``admin`` scope: read the middleware's figures (GetStats)."""
    journal: bool = False
    """The ``journal:read`` scope: consume the telemetry journal (JournalService)."""
    peer: bool = False
    """The ``peer`` scope: another middleware node (the peer protocol)."""
    _cache: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False, repr=False)

    def allows(self, action: str, key: str) -> bool:
        """Whether ``action`` (read, provide, create, actuate) is allowed on ``key``. Cached."""
        if self.everything:
            return True
        hit = self._cache.get((action, key))
        if hit is None:
            if action == "read":
                patterns = self.read + self.provide  # provide implies read
            elif action == "provide":
                patterns = self.provide
            elif action == "actuate":
                patterns = self.actuate
            else:
                patterns = self.create
            hit = any(p.matches(key) for p in patterns)
            if len(self._cache) < 100_000:
                self._cache[(action, key)] = hit
        return hit


ALL: Final = Grants(everything=True)


def parse_scopes(scope: str) -> Grants:
    """Grants from a space-separated scope string.

    Raises:
        ScopeError: an entry is not ``read``, ``provide``, ``create`` or
            ``actuate``, alone or followed by ``:`` and a valid key pattern.
    """
    found: dict[str, list[Glob]] = {a: [] for a in ACTIONS}
    admin = False
    journal = False
    peer = False
    for entry in scope.split():
        if entry == PEER:
            peer = True
            continue
        if entry == JOURNAL_READ:
            journal = True
            continue
        action, sep, glob = entry.partition(":")
        if action == ADMIN:
            if sep:
                raise ScopeError(f"bad scope {entry!r}: {ADMIN} takes no key pattern")
            admin = True
            continue
        if action not in found:
            raise ScopeError(
                f"bad scope {entry!r}: use read:PATTERN, provide:PATTERN, create:PATTERN "
                f"or actuate:PATTERN (without :PATTERN: every key), or {ADMIN}, {PEER} "
                f"or {JOURNAL_READ}"
            )
        found[action].append(compile_glob(glob if sep else "**"))
    return Grants(
        tuple(found["read"]),
        tuple(found["provide"]),
        tuple(found["create"]),
        tuple(found["actuate"]),
        admin=admin,
        journal=journal,
        peer=peer,
    )
