"""metrics: what a running middleware can tell an operator, read when asked.

Owns the figures (:mod:`~vehicle_middleware.server.metrics.stats`: per app, per key, the
process), the per-key write rates (:mod:`~vehicle_middleware.server.metrics.rates`), the
extension point other parts register their figures with
(:mod:`~vehicle_middleware.server.metrics.collectors`), their Prometheus rendering
(:mod:`~vehicle_middleware.server.metrics.prometheus`) and its HTTP endpoint
(:mod:`~vehicle_middleware.server.metrics.http`). ``GetStats``
(:mod:`vehicle_middleware.server.rpc.admin_service`)
and ``python -m vehicle_middleware.tools top`` (:mod:`vehicle_middleware.tools.top`) show the same
figures.

Everything is read at scrape time from counters the cores keep anyway: the
delivery path pays nothing for it. Must not import the servicers
(``vehicle_middleware.server.rpc``) or the SDK (``vehicle_middleware.sdk``).

Owns reading the figures, not keeping them: the cores keep the counters.
Imports the cores; must not import the servicers it reports on.
"""

from vehicle_middleware.server.metrics.collectors import Collector, Collectors, Figure
from vehicle_middleware.server.metrics.http import MetricsEndpoint, MetricsListenError
from vehicle_middleware.server.metrics.prometheus import SERIES, Series, registry_for
from vehicle_middleware.server.metrics.stats import MAX_TOP_KEYS, Stats, StatsReader

__all__ = [
    "MAX_TOP_KEYS",
    "SERIES",
    "Collector",
    "Collectors",
    "Figure",
    "MetricsEndpoint",
    "MetricsListenError",
    "Series",
    "Stats",
    "StatsReader",
    "registry_for",
]
