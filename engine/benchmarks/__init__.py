"""Benchmarks and profilers, run from a checkout as `python -m engine.benchmarks.<name>`.

Not part of the engine's distribution: engine/pyproject.toml excludes this folder from the wheel
and the sdist, and nothing under engine/ outside it imports it."""
