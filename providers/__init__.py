"""providers: processes that publish vehicle signals into the middleware.

Simulated vehicle (`sim`), replay of recordings (`replay`), VSS catalogs: `python -m providers`.
"""
