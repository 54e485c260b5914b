"""Waivers: recorded, approved exceptions, each bound to exactly one candidate."""
from __future__ import annotations

from releases.candidate import require_candidate
from releases.schema import validate


def build_waiver(candidate: dict, *, id: str, scope: str, subject: str, measured: str,
                 approved_by: str, reason: str) -> dict:
    record = {"candidate": dict(candidate), "id": id, "scope": scope, "subject": subject,
              "measured": measured, "approved_by": approved_by, "reason": reason}
    return validate("waiver", record, f"waivers/{id}.json")


def bind_waiver(waiver: dict, candidate: dict) -> dict:
    """Validate `waiver` and refuse it (RecordError) if it is about another candidate."""
    where = f"waivers/{waiver.get('id')}.json" if isinstance(waiver, dict) else "waiver"
    validate("waiver", waiver, where)
    require_candidate("waiver", waiver, candidate, where=where)
    return waiver
