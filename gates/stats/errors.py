"""Typed errors of the statistical judges."""

from __future__ import annotations


class StatsError(Exception):
    """Base of every error raised by gates.stats."""


class InputError(StatsError, ValueError):
    """Judge input that cannot be judged: names the source, the JSON path and what was wrong."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        self.message = message
        super().__init__(f"{source}: {path}: {message}")

