"""Verdict records: the common fields, validated by releases.schema against verdict-<judge>.schema.json."""

from __future__ import annotations

from typing import Any

from releases.schema import validate

from gates.stats.canonical import code_digest, digest

VERDICTS = ("pass", "fail", "inconclusive")
EXIT_CODES = {"pass": 0, "fail": 1, "inconclusive": 2}


def make_verdict(kind: str, data: dict, verdict: str, reasons: list[str], body: dict[str, Any]) -> dict:
    """Assemble a verdict record of kind 'verdict-<judge>' for input data; raises releases SchemaError
    if the record breaks its schema (a bug in this package, never bad input)."""
    assert verdict in VERDICTS, verdict
    record: dict[str, Any] = {
        "kind": kind,
        "schema": f"assay/{kind}/v1",
        "verdict": verdict,
        "reasons": reasons,
        "input_sha256": digest(data),
        "code_sha256": code_digest(),
        **body,
    }
    if isinstance(data.get("candidate"), dict):
        c = data["candidate"]
        record["candidate"] = {"id": c["id"], "commit": c["commit"], "tree": c["tree"]}
    return validate(kind, record, where="gates.stats")
