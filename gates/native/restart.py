"""restart: explicit save and graceful stop, restart, restore. The continuation served from the
restored checkpoint must equal a true-cold run of the same prompt (a new session: nothing cached,
nothing restored) in token ids and UTF-8 bytes; a checkpoint tampered with while the engine was
down is refused; cached tokens, the stop's flush and the restart's seconds are recorded.

Token ids come from the engine's own checkpoint files (docs/API.md: tokens.json holds a session's
prompt and output ids), read on the host; texts are compared as bytes and recorded as digests."""

from __future__ import annotations

import hashlib

from gates.phases import PhaseFailed

FIRST = "Tell me a short story about a lighthouse keeper."
SECOND = "Continue the story with one more sentence."


def _chat(rt, messages, n, session=None):
    body = {"model": rt.model_name, "messages": messages, "temperature": 0, "max_tokens": n}
    if session:
        body["prompt_cache_key"] = session
    r = rt.probe("request", {**rt.http(), "method": "POST", "path": "/v1/chat/completions", "body": body})
    if r["status"] != 200:
        raise PhaseFailed(f"chat on session {session!r} answered {r['status']}", {"status": r["status"]})
    return r["body"]["choices"][0]["message"]["content"], r["body"]["usage"]


def _save(rt, session):
    r = rt.probe("request", {**rt.http(), "method": "POST", "path": "/v1/engine/checkpoints", "body": {"session": session}})
    if r["status"] != 200 or r["body"].get("status") != "available":
        raise PhaseFailed(f"explicit checkpoint save of {session!r} answered {r['status']}", {"status": r["status"]})
    return r["body"]


def engine_session(api_key: str, prompt_cache_key: str) -> str:
    """The engine session a prompt_cache_key names for the caller's API key (docs/API.md, Tenancy):
    `<tenant>/<key>`, the tenant being 32 hex digits of sha256("assay-engine/tenant/v1\\0" + api key).
    Checkpoints live under that name, so the lane reads them back by it."""
    tenant = hashlib.sha256(b"assay-engine/tenant/v1\0" + api_key.encode("utf-8")).hexdigest()[:32]
    return f"{tenant}/{prompt_cache_key}"


def _token_ids(rt, session):
    files = rt.probe("checkpoint-files", {"directory": rt.checkpoint_dir, "session": engine_session(rt.api_key(), session)})
    if not files["found"]:
        raise PhaseFailed(f"no checkpoint on disk for session {session!r}")
    return files, rt.probe("read-json", {"path": files["tokens"]})["value"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run(rt) -> dict:
    n = rt.spec.setting("restart_tokens")
    rt.ensure_engine()
    first = [{"role": "user", "content": FIRST}]
    text1, _ = _chat(rt, first, n, "restart-main")
    saved = _save(rt, "restart-main")
    _chat(rt, [{"role": "user", "content": "Name a colour."}], 4, "restart-tamper")
    _save(rt, "restart-tamper")
    _chat(rt, [{"role": "user", "content": "Name a fruit."}], 4, "restart-flush")   # left for the stop to save

    stop = rt.stop(rt.engine)
    shutdown = rt.probe("log-events", {"path": rt.request_log, "event": "shutdown"})["records"]
    flush = shutdown[-1] if shutdown else {}
    if stop["exit_code"] != 0 or not flush.get("complete"):
        raise PhaseFailed("the engine did not stop gracefully", {"stop": stop, "shutdown_complete": flush.get("complete")})
    tamper_files, _ = _token_ids(rt, "restart-tamper")
    rt.probe("tamper", {"path": tamper_files["tensors"]})

    engine = rt.ensure_engine()
    second = first + [{"role": "assistant", "content": text1}, {"role": "user", "content": SECOND}]
    restored_text, restored_usage = _chat(rt, second, n, "restart-main")
    _save(rt, "restart-main")
    cold_text, cold_usage = _chat(rt, second, n, "restart-cold")
    _save(rt, "restart-cold")
    _, restored_ids = _token_ids(rt, "restart-main")
    _, cold_ids = _token_ids(rt, "restart-cold")

    tamper_state = rt.probe("request", {**rt.http(), "method": "GET", "path": "/v1/engine/checkpoints/restart-tamper"})
    _, tamper_usage = _chat(rt, [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
                                 {"role": "user", "content": "Another?"}], 4, "restart-tamper")
    flushed = rt.probe("request", {**rt.http(), "method": "GET", "path": "/v1/engine/checkpoints/restart-flush"})

    facts = {
        "saved_tokens": saved["tokens"], "saved_bytes": saved["bytes"],
        "stop_s": stop["stop_s"], "stop_exit_code": stop["exit_code"],
        "stop_flush": {"saved": flush.get("saved"), "save_failed": flush.get("save_failed"),
                       "flushed_session_status": flushed["body"].get("status") if flushed["status"] == 200 else flushed["status"]},
        "restart_s": engine.ready_s,
        "restored_cached_tokens": restored_usage["prompt_tokens_details"]["cached_tokens"],
        "cold_cached_tokens": cold_usage["prompt_tokens_details"]["cached_tokens"],
        "prompt_tokens": restored_usage["prompt_tokens"], "completion_tokens": restored_usage["completion_tokens"],
        "compared_token_ids": len(restored_ids), "token_ids_equal": restored_ids == cold_ids,
        "token_ids_sha256": _sha(",".join(map(str, restored_ids))),
        "utf8_bytes_equal": restored_text.encode("utf-8") == cold_text.encode("utf-8"),
        "text_sha256": _sha(restored_text), "cold_text_sha256": _sha(cold_text),
        "tampered_checkpoint_status": tamper_state["body"].get("status") if tamper_state["status"] == 200 else tamper_state["status"],
        "tampered_cached_tokens": tamper_usage["prompt_tokens_details"]["cached_tokens"],
    }
    problems = []
    if facts["restored_cached_tokens"] <= 0:
        problems.append("the restarted engine reused nothing of the saved session")
    if facts["cold_cached_tokens"] != 0:
        problems.append("the cold run was not cold")
    if not (facts["token_ids_equal"] and facts["utf8_bytes_equal"]
            and restored_usage["completion_tokens"] == cold_usage["completion_tokens"]):
        problems.append("the restored continuation differs from the cold run")
    if facts["tampered_checkpoint_status"] != "corrupt" or facts["tampered_cached_tokens"] != 0:
        problems.append("a tampered checkpoint was not refused")
    if not flush.get("saved") or facts["stop_flush"]["flushed_session_status"] != "available":
        problems.append("the graceful stop did not flush the unsaved session")
    if problems:
        raise PhaseFailed("; ".join(problems), facts)
    return facts
