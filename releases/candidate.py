"""The candidate reference every record carries, and the check that it is the right one."""
from __future__ import annotations

from typing import Any

from releases.canonical import digest
from releases.errors import RecordError
from releases.schema import validate


def candidate_ref(candidate: dict) -> dict:
    """{"id": sha256 of the canonical candidate record, "commit", "tree"}."""
    validate("candidate", candidate, "candidate")
    return {"id": digest(candidate), "commit": candidate["commit"], "tree": candidate["tree"]}


def candidate_subject(candidate: dict) -> dict:
    """The in-toto subject a `candidate` receipt speaks about: `<source>@<commit>:<subdir>`, whose
    digest is the candidate id."""
    name = f"{candidate['source']['name']}@{candidate['commit']}:{candidate['source']['subdir']}"
    return {"name": name, "digest": {"sha256": candidate_ref(candidate)["id"]}}


def record_candidate(kind: str, record: dict) -> Any:
    """The candidate reference a record of `kind` names (build provenance keeps it deeper)."""
    if kind == "candidate":
        return {"id": digest(record), "commit": record.get("commit"), "tree": record.get("tree")}
    if kind == "build":
        return record.get("buildDefinition", {}).get("externalParameters", {}).get("candidate")
    return record.get("candidate")


def candidate_mismatch(found: Any, expected: dict) -> str | None:
    """A sentence naming what differs, or None when `found` is `expected`."""
    if not isinstance(found, dict):
        return "names no candidate"
    diffs = [k for k in ("id", "commit", "tree") if found.get(k) != expected.get(k)]
    if not diffs:
        return None
    parts = ", ".join(f"{k} {found.get(k)} != {expected.get(k)}" for k in diffs)
    return f"names another candidate ({parts})"


def require_candidate(kind: str, record: dict, expected: dict, *, where: str = "") -> None:
    """Refuse a record about another candidate (RecordError)."""
    problem = candidate_mismatch(record_candidate(kind, record), expected)
    if problem:
        raise RecordError(f"{kind} record {problem}", where=where or kind)
