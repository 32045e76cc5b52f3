"""metrics: what a running middleware can tell an operator, read when asked.

Owns the figures (:mod:`~middleware.metrics.stats`: per app, per key, the
process), the per-key write rates (:mod:`~middleware.metrics.rates`), the
extension point other parts register their figures with
(:mod:`~middleware.metrics.collectors`), their Prometheus rendering
(:mod:`~middleware.metrics.prometheus`) and its HTTP endpoint
(:mod:`~middleware.metrics.http`). ``GetStats`` (:mod:`middleware.rpc.admin_service`)
and ``python -m middleware top`` (:mod:`middleware.top`) show the same figures.

Everything is read at scrape time from counters the cores keep anyway: the
delivery path pays nothing for it. Must not import the servicers
(``middleware.rpc``) or the SDK (``middleware.client``).

Owns reading the figures, not keeping them: the cores keep the counters.
Imports the cores; must not import the servicers it reports on.
"""

from middleware.metrics.collectors import Collector, Collectors, Figure
from middleware.metrics.http import MetricsEndpoint, MetricsListenError
from middleware.metrics.prometheus import SERIES, Series, registry_for
from middleware.metrics.stats import MAX_TOP_KEYS, Stats, StatsReader

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
