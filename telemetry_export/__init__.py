"""telemetry_export: the PySpark analysis of the middleware's telemetry journal.

``python -m telemetry_export ingest`` turns journal segments into a validated
Parquet dataset; ``analyze`` finds seq gaps and reconciles them with the drops,
staleness, drop rates, restarts, lost journal records and broken hash chains;
``synth`` writes synthetic fleets of journals. Structure: :mod:`extract`
(read), :mod:`transforms` (pure DataFrame -> DataFrame), :mod:`load` (write
tables, summary, report), :mod:`job` (the wiring), :mod:`session` (Spark set-up).
"""
