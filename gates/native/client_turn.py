"""client-turn: the official `openai` client completes a streamed chat turn and a responses
continuation (previous_response_id) against the engine."""

from __future__ import annotations

from gates.phases import PhaseFailed


def run(rt) -> dict:
    out = rt.probe("client-turn", rt.http({"tokens": rt.spec.setting("protocol_tokens")}))
    if out.get("client") is None:
        raise PhaseFailed(out.get("unavailable", "no client"), out, status="inconclusive")
    problems = []
    if out["chat_chunks"] < 1 or out["chat_finish_reason"] not in ("stop", "length") or not out["chat_text_nonempty"]:
        problems.append("the streamed chat turn did not complete")
    if out["first_status"] not in ("completed", "incomplete") or out["second_status"] not in ("completed", "incomplete"):
        problems.append("a responses turn did not complete")
    if not out["second_previous_id_matches"] or out["second_input_tokens"] < out["first_total_tokens"]:
        problems.append("the continuation did not carry the first response's conversation")
    if problems:
        raise PhaseFailed("; ".join(problems), out)
    return out
