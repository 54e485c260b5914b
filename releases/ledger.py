"""Review ledger: what reviewers found in one candidate, how each item was disposed, and the
accountable lead's closure (record shape in docs/INTERFACES.md, schema `ledger`).

Reviewers supply it, as a TOML file (load_review_toml) or through the `assay review` commands
(releases.review_cli, edits in releases.ledger_edits); the pipeline only binds it to the
candidate and to the release by digest.
"""
from __future__ import annotations

import copy
import tomllib
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from releases.candidate import require_candidate
from releases.clock import utc_now
from releases.canonical import load_json_bytes
from releases.errors import RecordError
from releases.schema import validate

LEDGER_SCHEMA = "assay/review-ledger/v1"
PRIORITIES = ("P0", "P1", "P2", "P3")
# The closure rule: an open in-scope item of these priorities keeps the review from closing.
BLOCKING = ("P0", "P1")
DISPOSITIONS = ("open", "fixed", "deferred", "accepted-risk")
# What a run with no reviewer input records (see default_ledger).
NO_REVIEW_ID = "no-review"
NO_REVIEW_STATEMENT = "no review items were recorded"


def new_ledger(candidate: dict, *, review_id: str, base: str | None, head: str | None = None,
               seats: list[dict] | None = None) -> dict:
    """An open ledger with no items; `head` defaults to the candidate's commit."""
    record = {"ledger_schema": LEDGER_SCHEMA, "candidate": dict(candidate), "review_id": review_id,
              "base": base, "head": head or candidate.get("commit"), "seats": copy.deepcopy(list(seats or [])),
              "rounds": [], "items": [], "closure": None}
    return check_ledger(record)


def default_ledger(candidate: dict, *, by: str = "pipeline", at: str | None = None) -> dict:
    """The ledger of a run no reviewer supplied one for: no seats, no rounds, no items, and a
    closure that says exactly that. It passes the closure rule (nothing is open) without
    claiming a review took place; is_unreviewed() and the summary say so."""
    record = new_ledger(candidate, review_id=NO_REVIEW_ID, base=None)
    record["closure"] = {"by": by, "at": at or utc_now(), "statement": NO_REVIEW_STATEMENT}
    return check_ledger(record)


def is_unreviewed(ledger: dict) -> bool:
    """True for a ledger that records no review at all (default_ledger's shape)."""
    return not ledger["seats"] and not ledger["rounds"] and not ledger["items"]


def check_ledger(ledger: dict, where: str = "ledger.json") -> dict:
    """Schema, then what a schema cannot say: unique ids and roles, items naming a seat that
    exists, rounds numbered 1..n whose counts add up to the seats."""
    validate("ledger", ledger, where)
    problems = []
    roles = [s["role"] for s in ledger["seats"]]
    problems += [f"/seats: role {r!r} appears twice" for r in sorted({r for r in roles if roles.count(r) > 1})]
    ids = [i["id"] for i in ledger["items"]]
    problems += [f"/items: id {i!r} appears twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for n, item in enumerate(ledger["items"]):
        if "seat" in item and item["seat"] not in roles:
            problems.append(f"/items/{n}/seat: {item['seat']!r} is not one of the seats ({', '.join(roles) or 'none'})")
    for n, rnd in enumerate(ledger["rounds"]):
        if rnd["round"] != n + 1:
            problems.append(f"/rounds/{n}/round: is {rnd['round']}, expected {n + 1} (rounds are numbered in order)")
        total = rnd["completed"] + rnd["missing"] + rnd["aborted"]
        if total != len(roles):
            problems.append(f"/rounds/{n}: completed + missing + aborted = {total}, expected {len(roles)} (one per seat)")
    if problems:
        raise RecordError("; ".join(problems), where=where)
    return ledger


def closure_problems(ledger: dict) -> list[str]:
    """Why the review is not closed; empty means closed. The rule: no open in-scope P0 or P1
    item, and the accountable lead's closure recorded. Compose and verify both call this."""
    problems = [f"item {i['id']} ({i['priority']}, in scope) is open: {i['title']}"
                for i in ledger["items"]
                if i["in_scope"] and i["priority"] in BLOCKING and i["disposition"]["status"] == "open"]
    if ledger.get("closure") is None:
        problems.append(f"review {ledger['review_id']} has no closure by its accountable lead")
    return problems


def require_closed(ledger: dict, where: str = "ledger.json") -> dict:
    """Refuse (RecordError listing every problem) a ledger that closure_problems() finds open."""
    problems = closure_problems(ledger)
    if problems:
        raise RecordError("review ledger is not closed: " + "; ".join(problems), where=where)
    return ledger


def bind_ledger(ledger: dict, candidate: dict, where: str = "ledger.json") -> dict:
    """Validate `ledger` and refuse it (RecordError) if it is about another candidate or
    reviewed another commit than the candidate's."""
    check_ledger(ledger, where)
    require_candidate("ledger", ledger, candidate, where=where)
    if ledger["head"] != candidate["commit"]:
        raise RecordError(f"ledger reviewed head {ledger['head']}, not the candidate's commit {candidate['commit']}",
                          where=where)
    return ledger


def load_review_toml(path: str | Path, candidate: dict) -> dict:
    """Read a reviewers' TOML file into a ledger record for `candidate`. Errors (RecordError or its
    SchemaError) name the file, the key path as a JSON pointer and what was expected."""
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise RecordError(f"cannot read review file: {exc.strerror or exc}", where=where) from exc
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RecordError(f"not UTF-8: {exc}", where=where) from exc
    except tomllib.TOMLDecodeError as exc:
        raise RecordError(f"not valid TOML: {exc}", where=where) from exc
    doc = _plain(doc, "", where)
    if "candidate" in doc:
        # A file that names its candidate must name this one; one that does not is bound here.
        require_candidate("ledger", doc, candidate, where=where)
    record = {"ledger_schema": LEDGER_SCHEMA, "candidate": dict(candidate), "head": candidate.get("commit"),
              "base": None, "seats": [], "rounds": [], "items": [], "closure": None, **doc}
    return bind_ledger(record, candidate, where=where)


def load_ledger_file(path: str | Path, candidate: dict) -> dict:
    """A reviewers' ledger for `candidate` from a `.toml` review file or a ledger JSON file,
    validated and bound (errors name the file)."""
    if Path(path).suffix == ".toml":
        return load_review_toml(path, candidate)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RecordError(f"cannot read the ledger: {exc.strerror or exc}", where=str(path)) from exc
    return bind_ledger(load_json_bytes(data, where=str(path)), candidate, where=str(path))


def _plain(value: Any, pointer: str, where: str) -> Any:
    """TOML's date-times become RFC 3339 strings; a time without a UTC offset is refused."""
    if isinstance(value, dict):
        return {k: _plain(v, f"{pointer}/{k}", where) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, f"{pointer}/{n}", where) for n, v in enumerate(value)]
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise RecordError(f"at {pointer}: date-time {value.isoformat()} has no UTC offset "
                              "(expected RFC 3339, e.g. 2026-01-02T03:04:05Z)", where=where)
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, (date, time)):
        raise RecordError(f"at {pointer}: {value.isoformat()} is not a date-time with a UTC offset "
                          "(expected RFC 3339, e.g. 2026-01-02T03:04:05Z)", where=where)
    return value


def ledger_summary(ledger: dict) -> str:
    """Markdown for the approval summary: the review, its rounds, every item and the closure."""
    problems = closure_problems(ledger)
    state = "closed" if not problems else "NOT closed"
    lines = [f"### Review ledger `{ledger['review_id']}`: {state}", ""]
    if is_unreviewed(ledger):
        closure = ledger.get("closure") or {}
        lines.append(f"No reviewer supplied a ledger for this candidate: {closure.get('statement', NO_REVIEW_STATEMENT)}"
                     f" (recorded by {closure.get('by', '-')}).")
        lines += [f"- {p}" for p in problems]
        return "\n".join(lines) + "\n"
    base = ledger["base"] or "(not recorded)"
    lines.append(f"Reviewed `{base}` → `{ledger['head']}`; seats: "
                 + (", ".join(f"{s['role']}" + (f" ({s['reviewer']})" if "reviewer" in s else "")
                              for s in ledger["seats"]) or "none"))
    for r in ledger["rounds"]:
        lines.append(f"- round {r['round']}: {r['completed']} completed, {r['missing']} missing, {r['aborted']} aborted")
    lines += ["", "| item | priority | scope | disposition | title |", "|---|---|---|---|---|"]
    for item in ledger["items"]:
        scope = "in scope" if item["in_scope"] else "out of scope"
        lines.append(f"| {item['id']} | {item['priority']} | {scope} | {_disp_text(item['disposition'])} | "
                     f"{_cell(item['title'])} |")
    if not ledger["items"]:
        lines.append("| - | - | - | - | no items |")
    lines.append("")
    closure = ledger.get("closure")
    if closure:
        lines.append(f"Closed by {closure['by']} at {closure['at']}: {_cell(closure['statement'])}")
    lines += [f"- **blocking:** {p}" for p in problems]
    return "\n".join(lines) + "\n"


def _disp_text(d: dict) -> str:
    if d["status"] == "fixed":
        evidence = [f"commit `{d['commit'][:12]}`" if "commit" in d else "",
                    f"receipt `{d['receipt_sha256'][:12]}`" if "receipt_sha256" in d else ""]
        return "fixed (" + ", ".join(e for e in evidence if e) + ")"
    if d["status"] == "deferred":
        return f"deferred to {d['issue']}"
    if d["status"] == "accepted-risk":
        return f"risk accepted by {d['by']}: {_cell(d['reason'])}"
    return "**open**"


def _cell(text: str) -> str:
    # A table cell ends at a newline or an unescaped pipe.
    return " ".join(text.split()).replace("|", "\\|")
