"""Determinism judge: the same prompts on fresh servers must give identical output digests."""

from __future__ import annotations

from gates.stats.inputs import check_input, require_unique
from gates.stats.records import make_verdict


def judge_determinism(data: dict, *, source: str = "<input>") -> dict:
    """Compare every run with the first, prompt by prompt, in the first run's order."""
    check_input("determinism", data, source)
    runs = data["runs"]
    for r, run in enumerate(runs):
        require_unique(run, lambda o: o["prompt"], f"$.runs[{r}]", source)
    min_prompts = int(data.get("min_prompts", 1))
    reasons: list[str] = []
    if len(runs) < 2:
        reasons.append(f"{len(runs)} run(s) given; at least 2 needed")
    maps = [{o["prompt"]: o["output_sha256"] for o in run} for run in runs]
    prompts = [o["prompt"] for o in runs[0]] if runs else []
    if len(prompts) < min_prompts:
        reasons.append(f"{len(prompts)} prompt(s), need {min_prompts}")
    for r, m in enumerate(maps[1:], start=1):
        missing = [p for p in prompts if p not in m]
        extra = [p for p in m if p not in maps[0]]
        if missing or extra:
            reasons.append(f"run {r}: {len(missing)} prompt(s) missing, {len(extra)} not in run 0")

    differing: list = []
    first = None
    for p in prompts:
        digests = [m.get(p) for m in maps]
        bad = [r for r in range(1, len(maps)) if digests[r] is not None and digests[r] != digests[0]]
        if bad:
            differing.append(p)
            if first is None:
                first = {"prompt": p, "run": bad[0], "sha256": [digests[0], digests[bad[0]]]}
    valid = not reasons
    differ = set(differing)
    if first is not None:
        # A difference is decisive even when some prompt is missing: a missing prompt cannot undo it.
        verdict = "fail"
        reasons = [f"prompt {first['prompt']}: run {first['run']} output differs from run 0 "
                   f"({len(differing)} of {len(prompts)} prompts differ)"] + reasons
    else:
        verdict = "pass" if valid else "inconclusive"
    body = {
        "counts": {"runs": len(runs), "prompts": len(prompts), "differing": len(differing),
                   "identical": sum(1 for p in prompts if p not in differ and all(p in m for m in maps))},
        "first_difference": first,
    }
    return make_verdict("verdict-determinism", data, verdict, reasons, body)
