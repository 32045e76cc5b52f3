"""vehicle_middleware.telemetry_export: the PySpark analysis of the middleware's telemetry journal.

``python -m vehicle_middleware.telemetry_export ingest`` turns journal segments into a validated
Parquet dataset; ``analyze`` finds seq gaps and reconciles them with the drops,
staleness, drop rates, restarts, lost journal records and broken hash chains;
``synth`` writes synthetic fleets of journals. Structure: :mod:`extract`
(read), :mod:`transforms` (pure DataFrame -> DataFrame), :mod:`load` (write
the tables), :mod:`report` (``summary.json`` and ``report.md``) with
:mod:`plots`, :mod:`job` (the wiring), :mod:`session` (Spark set-up).

Owns the export path off the car and the fleet analysis: the collector, a
reliable consumer of the journal service landing records (:mod:`collect`, its
command line, over :mod:`collector`, :mod:`vehicle_state`, :mod:`positions`
and :mod:`landing_area`), the ingest of journal directories or a landing area,
as a batch or a Structured Stream (:mod:`ingest`, :mod:`dataset`,
:mod:`chain`), and the analysis above. Imports the journal's format
(``vehicle_middleware.contract.journal``), the SDK's channel and wire constants, and Spark;
must not import the server (its runtime, servicers, the cores' state): it
reads what the car wrote (``tests/unit/test_layout.py``).
"""
