"""The main job a newcomer runs: ``make demo`` (``python -m middleware.demo``)."""
