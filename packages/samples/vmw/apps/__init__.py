"""Sample in-car apps over the app SDK: ``python -m vmw.apps dashboard|logger|slow``.

Owns the sample apps and their harness. Imports only the SDK
(``vmw.sdk``) and the command-line support; must not import the
server (they are what any third-party app would be).
"""
