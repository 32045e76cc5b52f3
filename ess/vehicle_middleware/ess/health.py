"""Stale keys, pure: which watched keys went unwritten for longer than expected.

A key may have an *expected period*: the longest it may go without a write
(:class:`ExpectedPeriods`: operator rules by key prefix, then the catalog's
periods). :class:`StaleTracker` follows the keys that are watched (have a
subscriber) *and* have one; nothing else costs anything. It is driven by a
periodic tick, never by writes, so the write path does no work for it:

* at each tick it reads each followed key's version (the V-Store's write
  counter); a version that moved means the key was written since the last
  tick, at the store's write time clamped into (previous tick, now] (a
  provider's source time may be wrong or old; the store holds the write
  within that interval whatever it says);
* a key whose last write (or, never written, the tick it started being
  followed) is more than its period before ``now`` is stale: its subscribers
  are told ``KeyStale`` once; a subscriber that joins while it is stale is
  told at the next tick;
* a stale key written again is fresh: the apps told it was stale are told
  ``KeyFresh`` at the first tick after the write, so ``KeyFresh`` is up to one
  tick late, and ``KeyStale`` comes at most one tick after the period ended.

Time comes from the caller (ns since the epoch, the store's clock): tests pass
it in. No I/O, no clock of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from vehicle_middleware.ess.events import KeyFresh, KeyStale
from vehicle_middleware.vstore.errors import InvalidKeyNameError
from vehicle_middleware.vstore.keys import check_key_name

__all__ = [
    "MAX_EXPECTED_PERIOD_S",
    "ExpectedPeriods",
    "StaleNotice",
    "StaleTracker",
    "WriteSource",
    "parse_expect_rule",
]

MAX_EXPECTED_PERIOD_S: Final = 86_400.0
"""The longest expected period accepted (a day)."""


def parse_expect_rule(text: str) -> tuple[str, float]:
    """``PREFIX=SECONDS`` (e.g. ``Vehicle.Cabin=5``) as ``(prefix, seconds)``.

    The prefix is a key name: it covers itself and the keys below it. Seconds
    0 means no expectation (it turns a catalog's periods off for the branch).

    Raises:
        ValueError: not of that form, a bad prefix, or seconds outside
            0..86400 (the message names the rule and what is allowed).
    """
    prefix, sep, raw = text.partition("=")
    prefix, raw = prefix.strip(), raw.strip()
    example = "use PREFIX=SECONDS, e.g. Vehicle.Cabin.HVAC=5"
    if not sep or not prefix or not raw:
        raise ValueError(f"expect rule {text!r}: {example}")
    try:
        check_key_name(prefix)
    except InvalidKeyNameError as e:
        raise ValueError(f"expect rule {text!r}: the prefix is not a key name: {e}") from None
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"expect rule {text!r}: {raw!r} is not a number of seconds") from None
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_EXPECTED_PERIOD_S):
        raise ValueError(
            f"expect rule {text!r}: seconds must be 0 (none) to {MAX_EXPECTED_PERIOD_S:g}, "
            f"got {raw}"
        )
    return prefix, seconds


class ExpectedPeriods:
    """The expected period of each key name: rules by prefix, then a catalog.

    A rule's prefix covers the key of that name and every key below it; the
    longest matching prefix wins, and a rule wins over the catalog (the
    operator's word over the vehicle's description). A period of 0 is no
    expectation. Immutable.
    """

    __slots__ = ("_catalog", "_rules")

    def __init__(
        self, rules: Iterable[tuple[str, float]] = (), catalog: Mapping[str, float] = {}
    ) -> None:
        """Args:
        rules: ``(prefix, seconds)``, e.g. from :func:`parse_expect_rule`; a later
            rule for the same prefix wins.
        catalog: seconds by exact key name.
        """
        self._rules: dict[str, int] = {p: _ns(s) for p, s in rules}
        self._catalog: dict[str, int] = {n: _ns(s) for n, s in catalog.items() if s > 0}

    def __bool__(self) -> bool:
        return bool(self._catalog) or any(self._rules.values())

    def period_ns(self, name: str) -> int | None:
        """The key's expected period in ns, or None. O(segments of ``name``)."""
        rules = self._rules
        if rules:
            prefix = name
            while True:
                ns = rules.get(prefix)
                if ns is not None:
                    return ns or None
                prefix, dot, _ = prefix.rpartition(".")
                if not dot:
                    break
        return self._catalog.get(name)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


class WriteSource(Protocol):
    """What the tracker reads of the V-Store (which satisfies it as it is)."""

    def version_of(self, key_id: int) -> int: ...

    def peek(self, key_id: int) -> tuple[bytes | None, int]: ...


@dataclass(frozen=True, slots=True)
class StaleNotice:
    """What one tick says about one key.

    Attributes:
        event: ``KeyStale`` or ``KeyFresh``.
        apps: the apps to tell, in subscription order.
        transition: True when the key changed state at this tick; False for a
            ``KeyStale`` told to apps that subscribed after it went stale.
    """

    event: KeyStale | KeyFresh
    apps: tuple[str, ...]
    transition: bool


@dataclass(slots=True)
class _Followed:
    period_ns: int
    version: int = -1
    """The key's version at the last tick; -1: not read yet (the next tick starts it)."""
    since_ns: int = 0
    """Its last write, or, never written, when it started being followed."""
    last_write_ns: int = 0
    """Its last write (0: never written)."""
    stale: bool = False
    told: set[str] = field(default_factory=set)
    """Apps told it is stale (empty while fresh)."""


class StaleTracker:
    """Stale and fresh keys among those followed. Pure; time is passed in."""

    __slots__ = ("_followed", "_last_tick")

    def __init__(self) -> None:
        self._followed: dict[int, _Followed] = {}
        self._last_tick = 0

    def __len__(self) -> int:
        return len(self._followed)

    def __contains__(self, key: object) -> bool:
        return key in self._followed

    def follow(self, key: int, period_ns: int) -> None:
        """Follow ``key`` (it is watched and has an expected period). Its silence
        counts from its last write, read at the next tick. Following a followed
        key changes its period only. O(1)."""
        if period_ns <= 0:
            raise ValueError(f"an expected period is above 0 ns, got {period_ns}")
        state = self._followed.get(key)
        if state is None:
            self._followed[key] = _Followed(period_ns)
        else:
            state.period_ns = period_ns

    def unfollow(self, key: int) -> None:
        """Stop following ``key`` (nobody watches it, or it was removed); nobody is
        told anything. Idempotent. O(1)."""
        self._followed.pop(key, None)

    def forget_app(self, app: str) -> None:
        """Forget what ``app`` was told (it went away, or lost its lifecycle events
        to a resync): a key still stale is told to it again at the next tick.
        O(stale keys)."""
        for state in self._followed.values():
            if state.stale:
                state.told.discard(app)

    def stale(self) -> dict[int, KeyStale]:
        """The keys stale now, as the ``KeyStale`` their subscribers were told."""
        return {
            k: KeyStale(k, s.last_write_ns, s.period_ns)
            for k, s in self._followed.items()
            if s.stale
        }

    def tick(
        self,
        now_ns: int,
        source: WriteSource,
        subscribers: Callable[[int], Collection[str]],
    ) -> list[StaleNotice]:
        """Look at every followed key at time ``now_ns``; what to tell whom.

        Args:
            now_ns: now, on the store's clock (ns since the epoch).
            source: the versions and write times of the keys.
            subscribers: the apps subscribed to a key now.
        Returns:
            A ``KeyFresh`` to the apps told it was stale, for each stale key
            written since the last tick; a ``KeyStale`` to the subscribers not
            told yet, for each key silent for longer than its period.
        Complexity: O(followed keys + subscribers of stale keys).
        """
        previous = self._last_tick
        self._last_tick = now_ns
        notices: list[StaleNotice] = []
        for key, s in self._followed.items():
            version = source.version_of(key)
            if s.version < 0:
                s.version = version
                if version:
                    s.since_ns = s.last_write_ns = min(source.peek(key)[1], now_ns)
                else:
                    s.since_ns = now_ns
            elif version != s.version:
                s.version = version
                # The write happened after the previous tick read the old version.
                s.since_ns = s.last_write_ns = max(previous, min(source.peek(key)[1], now_ns))
                if s.stale:
                    told = s.told
                    apps = tuple(a for a in subscribers(key) if a in told)
                    notices.append(StaleNotice(KeyFresh(key, s.last_write_ns), apps, True))
                    s.stale = False
                    s.told.clear()
            if now_ns - s.since_ns > s.period_ns:
                subs = subscribers(key)
                transition = not s.stale
                s.stale = True
                if s.told:
                    s.told.intersection_update(subs)
                new = tuple(a for a in subs if a not in s.told)
                if new or transition:
                    s.told.update(new)
                    notices.append(
                        StaleNotice(KeyStale(key, s.last_write_ns, s.period_ns), new, transition)
                    )
        return notices

    def followed(self) -> list[int]:
        """The keys followed, in the order they started being followed."""
        return list(self._followed)

    def check(self) -> None:
        """Assert the tracker's invariants (for tests)."""
        for key, s in self._followed.items():
            assert key > 0
            assert s.period_ns > 0
            assert s.stale or not s.told, f"key {key} is fresh but apps are told it is stale"
            assert s.last_write_ns <= s.since_ns or s.last_write_ns == 0
