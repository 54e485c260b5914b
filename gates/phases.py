"""What a phase of a lane yields: its outcome (status, times, facts), the exception a phase body
raises to fail, and the verdict of a chain of outcomes. The chain itself runs in
gates/qualify.py, where a passed phase's signed receipt is what lets a resumed run skip it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

STATUSES = ("pass", "fail", "inconclusive", "skipped")


@dataclass
class PhaseOutcome:
    name: str
    status: str
    started_at: str
    ended_at: str
    facts: dict[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "started_at": self.started_at,
                "ended_at": self.ended_at, "facts": self.facts}


class PhaseFailed(Exception):
    """Raised by a phase body to end the phase with status fail (or inconclusive) and the given facts."""

    def __init__(self, message: str, facts: dict[str, Any] | None = None, status: str = "fail"):
        super().__init__(message)
        self.facts = dict(facts or {})
        self.facts.setdefault("reason", message)
        self.status = status


Phase = tuple[str, Callable[[], dict[str, Any]]]


def verdict_of(outcomes: list[PhaseOutcome]) -> str:
    """pass only when every phase passed; inconclusive beats fail only when nothing failed."""
    statuses = {o.status for o in outcomes}
    if statuses == {"pass"}:
        return "pass"
    if "fail" in statuses:
        return "fail"
    return "inconclusive"
