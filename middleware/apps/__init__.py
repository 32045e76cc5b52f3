"""Sample in-car apps over the app SDK: ``python -m middleware.apps dashboard|logger|slow``."""
