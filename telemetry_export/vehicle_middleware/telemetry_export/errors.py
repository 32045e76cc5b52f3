"""The fleet side's errors: why the collector cannot use a source or the landing area.

Raised by :mod:`vehicle_middleware.telemetry_export.landing_area`,
:mod:`vehicle_middleware.telemetry_export.vehicle_state` and
:mod:`vehicle_middleware.telemetry_export.collector`;
:mod:`vehicle_middleware.telemetry_export.collect` turns one into a failed
source (exit status 1) or, before collecting starts, into exit status 2.
"""

from __future__ import annotations

__all__ = ["CollectError"]


class CollectError(RuntimeError):
    """A source or the landing area cannot be used (the message says why)."""
