"""metrics: what a running middleware can tell an operator, read when asked.

Owns the figures (:mod:`~vmw.server.metrics.stats`: per app, per key, the
process), the per-key write rates (:mod:`~vmw.server.metrics.rates`), the
extension point other parts register their figures with
(:mod:`~vmw.server.metrics.collectors`), their Prometheus rendering
(:mod:`~vmw.server.metrics.prometheus`) and its HTTP endpoint
(:mod:`~vmw.server.metrics.http`). ``GetStats`` (:mod:`vmw.server.rpc.admin_service`)
and ``python -m vmw.tools top`` (:mod:`vmw.tools.top`) show the same figures.

Everything is read at scrape time from counters the cores keep anyway: the
delivery path pays nothing for it. Must not import the servicers
(``vmw.server.rpc``) or the SDK (``vmw.sdk``).

Owns reading the figures, not keeping them: the cores keep the counters.
Imports the cores; must not import the servicers it reports on.
"""

from vmw.server.metrics.collectors import Collector, Collectors, Figure
from vmw.server.metrics.http import MetricsEndpoint, MetricsListenError
from vmw.server.metrics.prometheus import SERIES, Series, registry_for
from vmw.server.metrics.stats import MAX_TOP_KEYS, Stats, StatsReader

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
