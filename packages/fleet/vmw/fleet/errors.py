"""The fleet side's errors: why the collector cannot use a source or the landing area.

Raised by :mod:`vmw.fleet.landing_area`, :mod:`vmw.fleet.vehicle_state` and
:mod:`vmw.fleet.collector`; :mod:`vmw.fleet.collect` turns one into a failed
source (exit status 1) or, before collecting starts, into exit status 2.
"""

from __future__ import annotations

__all__ = ["CollectError"]


class CollectError(RuntimeError):
    """A source or the landing area cannot be used (the message says why)."""
