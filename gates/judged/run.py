"""The four judged gates against two running servers, in the order their inputs need:
determinism first (the quality screen requires it passed), then ABBA, quality, TTFT parity."""

from __future__ import annotations

from typing import Callable

from gates.judged.abba import run_abba
from gates.judged.client import Endpoint
from gates.judged.determinism import run_determinism
from gates.judged.identity import check_candidate_ref, check_incumbent, served_identity
from gates.judged.latency import run_latency
from gates.judged.quality import run_quality
from gates.judged.settings import resolve

KINDS = ("verdict-determinism", "verdict-abba", "verdict-noninferiority", "verdict-latency")


def run_judged(candidate: Endpoint, incumbent: Endpoint, *, lane: str, size: str,
               lane_gates: dict | None = None, incumbent_identity: dict | None = None,
               candidate_ref: dict | None = None, waivers: list[dict] = (),
               restart_candidate: Callable[[], Endpoint] | None = None,
               restart_incumbent: Callable[[], Endpoint] | None = None,
               progress: Callable[[str], None] | None = None) -> dict[str, dict]:
    """Return {kind: judged verdict record} for the four gates.

    lane_gates: the lane's `[lanes.gates.*]` tables ({"abba": {"min_ratio": 0.97}, ...}).
    incumbent_identity: builders.incumbent's {version, wheel_sha256, source_commit, origin}.
    restart_*: optional hooks that restart a server and return its new endpoint (a fresh server
    for the determinism rerun, and the restored-session latency position)."""
    settings = resolve(size, lane_gates)
    incumbent_identity = check_incumbent(incumbent_identity)
    candidate_ref = check_candidate_ref(candidate_ref)
    served = {"candidate": served_identity(candidate), "incumbent": served_identity(incumbent)}
    context = {"lane": lane, "size": size, "incumbent": incumbent_identity, "served": served}
    say = progress or (lambda text: None)
    common = {"waivers": list(waivers), "candidate_ref": candidate_ref}
    out: dict[str, dict] = {}
    current = {"candidate": candidate}

    def restarted() -> Endpoint:  # keep the endpoint of the server that runs now
        current["candidate"] = restart_candidate()
        return current["candidate"]

    say("determinism")
    out["verdict-determinism"] = run_determinism(candidate, settings, context,
                                                 restart=restarted if restart_candidate else None, **common)
    candidate = current["candidate"]
    say("abba")
    out["verdict-abba"] = run_abba(candidate, incumbent, settings, context, **common)
    say("noninferiority")
    out["verdict-noninferiority"] = run_quality(
        candidate, incumbent, settings, context,
        determinism_passed=out["verdict-determinism"]["verdict"] == "pass",
        progress=lambda gate, done, total: say(f"{gate} {done}/{total}"), **common)
    say("latency")
    out["verdict-latency"] = run_latency(candidate, incumbent, settings, context, restart_candidate=restart_candidate,
                                         restart_incumbent=restart_incumbent, **common)
    return out
