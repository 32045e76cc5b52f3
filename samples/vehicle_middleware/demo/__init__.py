"""The main job a newcomer runs: ``make demo`` (``python -m vehicle_middleware.demo``).

:mod:`processes` (children started, watched and always stopped by pid),
:mod:`export` (the journal on disk against the landing area and the dataset),
:mod:`spark` (the streaming ingest and the analysis in one Spark session),
:mod:`summary` (the verdict, pure).

Owns the demo: the order it starts and stops the whole product in (middleware,
collector, car, apps, Spark) and its verdict. It drives the product as a user
does, through processes and their command lines; it may import the analysis
(:mod:`spark` runs it), and nothing else may import it.
"""
