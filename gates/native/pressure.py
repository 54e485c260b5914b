"""pressure-protocol: the same contract under concurrency. A fanout at the lane's limit answers
every request with 200 and each session exactly what it answers alone (no cross-talk); a burst
beyond the limit gets only documented refusals (429 server_overloaded, 503
request_queue_timeout); two requests on one session at once get 409 session_busy."""

from __future__ import annotations

from gates.phases import PhaseFailed


def run(rt) -> dict:
    limit = rt.spec.setting("max_concurrency")
    out = rt.probe("pressure", rt.http({"tokens": rt.spec.setting("pressure_tokens"), "fanout": max(4, limit),
                                        "max_concurrency": limit, "max_pending": rt.spec.setting("max_pending"),
                                        "busy_tokens": rt.spec.setting("pressure_busy_tokens")}))
    problems = []
    if out["errors"]:
        problems.append(f"{out['errors']} error(s) at fanout {out['fanout']}")
    if out["cross_talk"]:
        problems.append(f"{out['cross_talk']} session(s) answered differently under load")
    if out["undocumented"]:
        problems.append(f"{out['undocumented']} undocumented status(es) beyond the limit: {out['burst_statuses']}")
    if not out["session_busy_409"]:
        problems.append("a second request on a busy session was not refused with 409 session_busy")
    if problems:
        raise PhaseFailed("; ".join(problems), out)
    return out
