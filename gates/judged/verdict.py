"""A judged verdict: the gates.stats record plus the `judged` context (schemas/judged.schema.json).

The judge's own fields stay as it wrote them and validate against releases/schemas/verdict-*;
a rule the judge does not know (the ABBA weighted `min_ratio`, the latency gate's cached-token
and error rules) can only make the verdict stricter, and the judge's own verdict is kept in
`judged.judge_verdict`. `findings` are what a waiver must name exactly.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import jsonschema

from releases.schema import validate

from gates.judged.identity import code_digest
from gates.judged.waivers import apply_waivers

_SCHEMA = Path(__file__).resolve().parent / "schemas" / "judged.schema.json"
_RANK = {"pass": 0, "inconclusive": 1, "fail": 2}


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(_SCHEMA.read_text("utf-8")))


def finish(record: dict, *, context: dict, findings: list[dict], extra: list[tuple[str, str]] = (),
           waivers: list[dict] = (), power: dict | None = None, settings: dict) -> dict:
    """Attach the judged context to a judge's record.

    extra: (verdict, reason) pairs from rules beyond the judge; the worse verdict wins
    (fail > inconclusive > pass). context: lane, size, incumbent, served, corpus."""
    judge_verdict = record["verdict"]
    verdict = judge_verdict
    reasons = list(record["reasons"]) if judge_verdict != "pass" else []
    for level, reason in extra:
        reasons.append(reason)
        if _RANK[level] > _RANK[verdict]:
            verdict = level
    out = dict(record)
    out["verdict"] = verdict
    out["reasons"] = reasons if verdict != "pass" else list(record["reasons"])
    judged = {"gate": record["kind"], "lane": context["lane"], "size": context["size"],
              "incumbent": context["incumbent"], "served": context["served"], "settings": settings,
              "corpus": context.get("corpus"), "judge_verdict": judge_verdict,
              "findings": findings if verdict != "pass" else [], "waivers": [], "blocking": verdict != "pass",
              "code_sha256": code_digest()}
    if power is not None:
        judged["power"] = power
    if context.get("evidence_sha256"):
        judged["evidence_sha256"] = context["evidence_sha256"]
    out["judged"] = judged
    apply_waivers(out, list(waivers), context["lane"])
    return check(out)


def check(record: dict) -> dict:
    """Validate a judged verdict: the judge's part against releases' verdict schema, the `judged`
    part against schemas/judged.schema.json. A failure here is a bug, never bad input."""
    judged = record["judged"]
    validate(record["kind"], {k: v for k, v in record.items() if k != "judged"}, where="gates.judged")
    errors = sorted(_validator().iter_errors(judged), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ValueError(f"judged context of {record['kind']}: {errors[0].message} at "
                         f"/{'/'.join(map(str, errors[0].absolute_path))}")
    return record
