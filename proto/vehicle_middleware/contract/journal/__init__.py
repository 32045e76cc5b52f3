"""The telemetry journal's format: record kinds and fields (:mod:`.records`),
offsets and the hash chain (:mod:`.chain`), the landing layout (:mod:`.landing`).

The middleware's writer, the collector and the Spark ingest all import it.
"""
