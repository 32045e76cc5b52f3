"""Benchmarks of the middleware's hot paths, run by ``make bench-*`` (not part of the tests).

Owns each benchmark and its ceilings or floors measured in the same run (see
BENCHMARKS.md). Imports anything it measures; nothing imports it.
"""
