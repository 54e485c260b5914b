"""Review ledger: the decisions reviewers took about one candidate."""
from __future__ import annotations

import copy

from releases.candidate import require_candidate
from releases.errors import RecordError
from releases.schema import validate


def build_ledger(candidate: dict, entries: list[dict] | None = None) -> dict:
    return validate("ledger", {"candidate": dict(candidate), "entries": list(entries or [])}, "ledger.json")


def add_entry(ledger: dict, *, id: str, subject_sha256: str, decision: str, role: str, at: str) -> dict:
    """A copy of `ledger` with one more entry; entry ids are unique."""
    if any(e["id"] == id for e in ledger["entries"]):
        raise RecordError(f"ledger already has an entry {id!r}", where="ledger.json")
    out = copy.deepcopy(ledger)
    out["entries"].append({"id": id, "subject_sha256": subject_sha256, "decision": decision, "role": role, "at": at})
    return validate("ledger", out, "ledger.json")


def bind_ledger(ledger: dict, candidate: dict) -> dict:
    """Validate `ledger` and refuse it (RecordError) if it is about another candidate."""
    validate("ledger", ledger, "ledger.json")
    require_candidate("ledger", ledger, candidate, where="ledger.json")
    ids = [e["id"] for e in ledger["entries"]]
    if len(ids) != len(set(ids)):
        raise RecordError("ledger entry ids are not unique", where="ledger.json")
    return ledger
