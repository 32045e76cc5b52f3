"""Apps that do not keep up: one warning when an episode of drops starts, a
line with running counts every ``every`` seconds while it goes on, one when it
ends.

:class:`DropEpisodes` is the rule, pure: the caller gives it each app's count
of events the drop rule threw away (``EventSubSystem.overflowed``) and the time.
:class:`SlowAppWatch` drives it from the event loop and logs what it says, so
an app that stopped reading is reported while it is stuck, not only once it
reads again (its delivery loop is blocked writing to it meanwhile).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.ess import EventSubSystem

__all__ = ["DropEpisodes", "Episode", "EpisodeReport", "SlowAppWatch"]

log = logging.getLogger(__name__)

REPORT_EVERY_S: Final = 10.0


class Episode(enum.Enum):
    STARTED = "started"
    ONGOING = "ongoing"
    ENDED = "ended"
    GONE = "gone"
    """The app went away (its stream ended) during the episode."""


@dataclass(frozen=True, slots=True)
class EpisodeReport:
    """One line to say about one app's episode."""

    app: str
    state: Episode
    dropped: int
    """Events dropped in the episode so far."""
    recent: int
    """Of those, since the previous report of the episode."""
    seconds: float
    """Since the episode started."""
    interval: float
    """Since the previous report of the episode."""
    pending: int
    """Events queued for the app now."""


@dataclass(slots=True)
class _Open:
    started: float
    base: int
    """The app's count before the episode."""
    reported: int
    """The count at the last report."""
    last_report: float
    last_drop: float
    drained: float
    """When its queues were last seen empty (-inf: not since the episode started)."""


class DropEpisodes:
    """Episodes of drops per app. Pure: time and counts come from the caller.

    An episode starts when an app's count grows; while it lasts, a report is
    due every ``every`` seconds in which the count grew again; it ends once
    the count has not grown for ``every`` seconds and the app's queues were
    empty since the last drop (it read what was queued: a stuck app whose
    provider went quiet is still stuck). O(1) per call.
    """

    def __init__(self, *, every: float = REPORT_EVERY_S) -> None:
        if every <= 0:
            raise ValueError(f"every must be above 0, not {every}")
        self.every = every
        self._last: dict[str, int] = {}
        """Each app's count at the last observation."""
        self._open: dict[str, _Open] = {}

    def in_episode(self, app: str) -> bool:
        return app in self._open

    def observe(self, app: str, count: int, pending: int, now: float) -> EpisodeReport | None:
        """The app's drop count and queued events at ``now``; what to report, if anything."""
        last = self._last.get(app, 0)
        if count < last:  # the app was removed and came back: its count restarted
            self.forget(app, now)
            last = 0
        self._last[app] = count
        ep = self._open.get(app)
        if ep is None:
            if count == last:
                return None
            self._open[app] = _Open(now, last, count, now, now, float("-inf"))
            n = count - last
            return EpisodeReport(app, Episode.STARTED, n, n, 0.0, 0.0, pending)
        if count > last:
            ep.last_drop = now
        if pending == 0:
            ep.drained = now
        if now - ep.last_report >= self.every and count > ep.reported:
            report = self._report(app, ep, Episode.ONGOING, count, pending, now)
            ep.reported, ep.last_report = count, now
            return report
        if now - ep.last_drop >= self.every and ep.drained >= ep.last_drop:
            del self._open[app]
            return self._report(app, ep, Episode.ENDED, count, pending, now)
        return None

    @staticmethod
    def _report(
        app: str, ep: _Open, state: Episode, count: int, pending: int, now: float
    ) -> EpisodeReport:
        return EpisodeReport(
            app,
            state,
            dropped=count - ep.base,
            recent=count - ep.reported,
            seconds=now - ep.started,
            interval=now - ep.last_report,
            pending=pending,
        )

    def drained(self, app: str, now: float) -> None:
        """The app's queues were emptied by a delivery (cheap when it is not in an episode)."""
        ep = self._open.get(app)
        if ep is not None:
            ep.drained = now

    def forget(self, app: str, now: float) -> EpisodeReport | None:
        """The app is gone; ends its episode, if one is open."""
        last = self._last.pop(app, 0)
        ep = self._open.pop(app, None)
        if ep is None:
            return None
        return self._report(app, ep, Episode.GONE, last, 0, now)

    def apps(self) -> list[str]:
        """Apps observed and not forgotten."""
        return list(self._last)

    def check(self) -> None:
        """Assert the invariants (for tests)."""
        for app, ep in self._open.items():
            assert app in self._last
            assert ep.base < ep.reported <= self._last[app]
            assert ep.started <= ep.last_report
            assert ep.started <= ep.last_drop


class SlowAppWatch:
    """Runs :class:`DropEpisodes` over the ESS's apps and logs its reports."""

    def __init__(
        self,
        ess: EventSubSystem,
        *,
        every: float = REPORT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ess = ess
        self._clock = clock
        self.episodes = DropEpisodes(every=every)

    def in_episode(self, app: str) -> bool:
        """Whether the app's queues are dropping events now (an episode is open). O(1)."""
        return self.episodes.in_episode(app)

    def drained(self, app: str) -> None:
        """Called by the delivery loop when a drain left the app's queues empty."""
        self.episodes.drained(app, self._clock())

    def check(self) -> list[EpisodeReport]:
        """Observe every app once; log and return the reports."""
        now = self._clock()
        ess = self._ess
        live = ess.apps()
        reports = [
            r
            for app in live
            if (r := self.episodes.observe(app, ess.overflowed(app), ess.pending(app), now))
        ]
        for gone in set(self.episodes.apps()) - set(live):
            r = self.episodes.forget(gone, now)
            if r is not None:
                reports.append(r)
        for r in reports:
            _log(r)
        return reports

    async def run(self, interval: float | None = None) -> None:
        """Check every ``interval`` seconds (default: a fifth of the report period, at
        most 1 s) until cancelled."""
        interval = interval or min(1.0, self.episodes.every / 5)
        while True:
            await asyncio.sleep(interval)
            self.check()


def _log(r: EpisodeReport) -> None:
    if r.state is Episode.STARTED:
        log.warning(
            "app %s is not keeping up: its queues are dropping events (%d dropped, %d queued)",
            r.app,
            r.dropped,
            r.pending,
        )
    elif r.state is Episode.ONGOING:
        log.warning(
            "app %s is still not keeping up: %d events dropped in the last %.0f s, "
            "%d in this episode of %.0f s (%d queued)",
            r.app,
            r.recent,
            r.interval,
            r.dropped,
            r.seconds,
            r.pending,
        )
    elif r.state is Episode.ENDED:
        log.info(
            "app %s caught up; %d events dropped in this episode of %.0f s",
            r.app,
            r.dropped,
            r.seconds,
        )
    else:
        log.info(
            "app %s went away while not keeping up; %d events dropped in this episode of %.0f s",
            r.app,
            r.dropped,
            r.seconds,
        )
