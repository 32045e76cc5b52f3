"""telemetry_export: the offline PySpark analysis of the middleware's journal.

Empty until the telemetry issue lands.
"""
