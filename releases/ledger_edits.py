"""Edits of a review ledger, as the `assay review` commands make them: each returns a validated
copy, and a closed ledger does not change."""
from __future__ import annotations

import copy

from releases.errors import RecordError
from releases.clock import utc_now
from releases.ledger import DISPOSITIONS, check_ledger, closure_problems


def _editable(ledger: dict) -> dict:
    if ledger.get("closure") is not None:
        c = ledger["closure"]
        raise RecordError(f"review {ledger['review_id']} was closed by {c['by']} at {c['at']}; "
                          "a closed ledger does not change (start a new review)", where="ledger.json")
    return copy.deepcopy(ledger)


def add_item(ledger: dict, *, id: str, title: str, priority: str, in_scope: bool = True,
             seat: str | None = None, disposition: dict | None = None) -> dict:
    """A copy with one more item (open unless `disposition` says otherwise)."""
    out = _editable(ledger)
    item = {"id": id, "title": title, "priority": priority, "in_scope": in_scope,
            "disposition": dict(disposition or {"status": "open"})}
    if seat is not None:
        item["seat"] = seat
    out["items"].append(item)
    return check_ledger(out)


def disposition(status: str, *, commit: str | None = None, receipt_sha256: str | None = None,
                issue: str | None = None, reason: str | None = None, by: str | None = None) -> dict:
    """A disposition record; refuses fields that do not belong to `status` (RecordError)."""
    allowed = {"open": (), "fixed": ("commit", "receipt_sha256"), "deferred": ("issue",),
               "accepted-risk": ("reason", "by")}
    if status not in allowed:
        raise RecordError(f"disposition {status!r} is not one of {', '.join(DISPOSITIONS)}")
    given = {k: v for k, v in (("commit", commit), ("receipt_sha256", receipt_sha256), ("issue", issue),
                                ("reason", reason), ("by", by)) if v is not None}
    extra = sorted(set(given) - set(allowed[status]))
    if extra:
        raise RecordError(f"disposition {status} takes no {', '.join(extra)}")
    needs = {"fixed": "evidence: a commit or a receipt digest", "deferred": "an issue reference",
             "accepted-risk": "a reason and who accepts the risk"}
    if status == "fixed" and not given or status == "deferred" and "issue" not in given \
            or status == "accepted-risk" and not {"reason", "by"} <= set(given):
        raise RecordError(f"disposition {status} needs {needs[status]}")
    return {"status": status, **given}


def dispose(ledger: dict, item_id: str, disp: dict) -> dict:
    """A copy with item `item_id` given disposition `disp` (see disposition())."""
    out = _editable(ledger)
    for item in out["items"]:
        if item["id"] == item_id:
            item["disposition"] = dict(disp)
            return check_ledger(out)
    raise RecordError(f"no item {item_id!r} (items: {', '.join(i['id'] for i in out['items']) or 'none'})",
                      where="ledger.json")


def add_round(ledger: dict, *, completed: int, missing: int = 0, aborted: int = 0) -> dict:
    """A copy with the next review round's counts."""
    out = _editable(ledger)
    out["rounds"].append({"round": len(out["rounds"]) + 1, "completed": completed, "missing": missing,
                          "aborted": aborted})
    return check_ledger(out)


def close(ledger: dict, *, by: str, statement: str, at: str | None = None) -> dict:
    """The accountable lead's closure; refused (RecordError naming the items) while the rule fails."""
    out = _editable(ledger)
    problems = [p for p in closure_problems(out) if "has no closure" not in p]
    if problems:
        raise RecordError("cannot close: " + "; ".join(problems), where="ledger.json")
    out["closure"] = {"by": by, "at": at or utc_now(), "statement": statement}
    return check_ledger(out)
