"""middleware: the vehicle middleware process.

Owns everything that runs in it, as thin adapters around the pure cores
(``vstore``, ``ess``, ``vss``, ``replica``): the settings (``config``), the
shared state (``runtime``), an app stream's delivery loop (``delivery``), the
gRPC services (``rpc``, ``kuksa``, ``cluster``), identity and scopes (``auth``,
``access``), the journal (``journal``), metrics (``metrics``), health, TLS,
the CLI; and, apart from the server, the SDKs (``client``), the sample apps
(``apps``) and the demo (``demo``).

Must not import the analysis (``telemetry_export``, Spark, matplotlib): the
demo runs it as a process. The SDK (``middleware.client``) imports nothing of
the server (``tests/unit/test_layout.py``).
"""
