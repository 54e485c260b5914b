"""Bisection: which variation makes each differing member differ.

Build a is the reference. A control trial rebuilds with every variation on a's side: whatever
differs there differs with nothing varied at all (`nondeterministic`: the clock read at nanosecond
precision, a random number, a dict of unhashed objects). Then one trial per variation that really
varied, each with only that variation on b's side. A difference of the a/b comparison is
attributed to the variation(s) whose trial reproduces it: one name, or several joined by `+`
when each alone is enough (e.g. RECORD, which lists the digests of every other member); when no
single variation reproduces it (an interaction of two), the cause is `unknown` and `tried`
lists the trials. One at a time, not by halving: with ten variations that is at most eleven
builds, and each trial answers for every member at once.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from builders import variations
from builders.compare import compare_file

CONTROL = "control"
NONDETERMINISTIC = "nondeterministic"
UNKNOWN = "unknown"
Trial = Callable[[str, dict[str, str]], Path]  # (trial name, plan) -> directory holding its artifacts


def differing(dir_a: Path, dir_x: Path) -> set[tuple[str, str | None]]:
    """(artifact, member) of every difference between the artifacts in DIR_A and DIR_X."""
    files_a = {p.name: p for p in dir_a.iterdir() if p.is_file()}
    files_x = {p.name: p for p in dir_x.iterdir() if p.is_file()}
    out: set[tuple[str, str | None]] = set()
    for name in sorted(set(files_a) | set(files_x)):
        entry, _ = compare_file(name, files_a.get(name), files_x.get(name))
        out.update((name, d["member"]) for d in entry["differences"])
    return out


def bisect(record: dict, dir_a: Path, trial: Trial, varied: Iterable[str],
           progress: Callable[[str], None] | None = None) -> dict:
    """The `bisection` part of a reproducibility record: one cause per difference, and the trials."""
    targets = [(f["name"], d["member"], d["kind"]) for f in record["files"] for d in f["differences"]]
    if not targets:
        return {"differences": [], "trials": []}
    names = [n for n in variations.NAMES if n in set(varied)]
    say = progress or (lambda line: None)
    hits: dict[str, set] = {}
    for name in [CONTROL, *names]:
        say(f"bisection trial {name}")
        plan = variations.plan_for("a") if name == CONTROL else variations.trial_plan(name)
        hits[name] = differing(dir_a, trial(name, plan))
    trials = [{"variation": name, "differing": len(hits[name])} for name in [CONTROL, *names]]
    out = []
    for artifact, member, kind in targets:
        key = (artifact, member)
        causes = [NONDETERMINISTIC] if key in hits[CONTROL] else [n for n in names if key in hits[n]]
        entry = {"artifact": artifact, "member": member, "kind": kind,
                 "cause": "+".join(causes) if causes else UNKNOWN, "causes": causes}
        if not causes:
            entry["tried"] = [CONTROL, *names]
        out.append(entry)
    return {"differences": out, "trials": trials}
