"""providers: processes that publish vehicle signals into the middleware.

Empty until the providers issue lands.
"""
