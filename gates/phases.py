"""The resumable phase chain a lane runs: each phase's outcome is persisted as it ends, so a rerun
of the same candidate on the same lane skips what already passed and starts at the first phase
that did not."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

STATUSES = ("pass", "fail", "inconclusive", "skipped")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    """Raised by a phase body to end the phase with status fail and the given facts."""

    def __init__(self, message: str, facts: dict[str, Any] | None = None, status: str = "fail"):
        super().__init__(message)
        self.facts = dict(facts or {})
        self.facts.setdefault("reason", message)
        self.status = status


Phase = tuple[str, Callable[[], dict[str, Any]]]


class PhaseChain:
    """Runs phases in order; stops at the first that does not pass (the rest are 'skipped')."""

    def __init__(self, state_file: Path, key: str, progress: Callable[[str], None] | None = None):
        self.state_file = Path(state_file)
        self.key = key
        self.progress = progress or (lambda message: None)
        self._state = self._load()

    def _load(self) -> dict[str, Any]:
        if self.state_file.exists():
            state = json.loads(self.state_file.read_text())
            if state.get("key") == self.key:
                return state
        return {"key": self.key, "phases": {}}

    def _save(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)

    def run(self, phases: list[Phase], resumable: set[str] = frozenset()) -> list[PhaseOutcome]:
        """Run phases; a phase named in `resumable` that passed before is not run again."""
        outcomes: list[PhaseOutcome] = []
        stopped = False
        for name, body in phases:
            if stopped:
                outcomes.append(PhaseOutcome(name, "skipped", _now(), _now(), {"reason": "an earlier phase did not pass"}))
                continue
            previous = self._state["phases"].get(name)
            if name in resumable and previous and previous["status"] == "pass":
                self.progress(f"phase {name}: passed earlier, resumed")
                outcomes.append(PhaseOutcome(**previous))
                continue
            started, t0 = _now(), time.monotonic()
            self.progress(f"phase {name}: running")
            try:
                facts = body() or {}
                status = "pass"
            except PhaseFailed as exc:
                facts, status = exc.facts, exc.status
            facts.setdefault("seconds", round(time.monotonic() - t0, 3))
            outcome = PhaseOutcome(name, status, started, _now(), facts)
            self._state["phases"][name] = outcome.as_record()
            self._save()
            self.progress(f"phase {name}: {status}")
            outcomes.append(outcome)
            stopped = status != "pass"
        return outcomes


def verdict_of(outcomes: list[PhaseOutcome]) -> str:
    """pass only when every phase passed; inconclusive beats fail only when nothing failed."""
    statuses = {o.status for o in outcomes}
    if statuses == {"pass"}:
        return "pass"
    if "fail" in statuses:
        return "fail"
    return "inconclusive"
