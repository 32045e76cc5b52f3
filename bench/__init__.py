"""Benchmarks of the middleware's hot paths (not part of the test suite)."""
