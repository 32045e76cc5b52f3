"""Sample in-car apps over the app SDK: ``python -m vehicle_middleware.apps dashboard|logger|slow``.

Owns the sample apps and their harness. Imports only the SDK
(``vehicle_middleware.sdk``) and the command-line support; must not import the
server (they are what any third-party app would be).
"""
