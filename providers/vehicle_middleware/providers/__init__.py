"""providers: processes that publish vehicle signals into the middleware.

Owns the simulated vehicle (``sim``), the replay of recordings (``replay``) and
their models and schedules: ``python -m vehicle_middleware.providers``. Imports the SDK
(``vehicle_middleware.sdk``), ``vss`` and the command-line support; must not import
the server's internals (they are clients like any other).
"""
