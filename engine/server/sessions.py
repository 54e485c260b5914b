"""Moving engine sessions to and from durable checkpoints."""
from __future__ import annotations

from typing import Any

from engine.server.checkpoints import CheckpointError
from engine.server.errors import APIError
from engine.server.state import ServerState


def save_session(state: ServerState, session: str) -> dict[str, Any]:
    """Export a cached engine session and write it as a checkpoint; returns the manifest."""
    if state.checkpoints is None:
        raise APIError("checkpoints_disabled", "no checkpoint directory is configured")
    if session not in state.llm.sessions():
        raise APIError("session_not_found", "the engine holds no session under this key",
                       "session")
    snap = state.llm.export_session(session)
    try:
        manifest = state.checkpoints.save(session, list(snap.token_ids), dict(snap.tensors))
    except CheckpointError as e:
        raise APIError("checkpoint_quota_exceeded", str(e), "session") from None
    state.mark_clean(session)
    with state.lock:
        state.counters.checkpoints_saved += 1
    return manifest


def restore_session(state: ServerState, session: str) -> str | None:
    """Before a request on a session the engine does not hold: import its checkpoint when one
    verifies. Returns what happened ("restored", "corrupt", "incompatible") or None."""
    if state.checkpoints is None or session in state.llm.sessions():
        return None
    info, loaded = state.checkpoints.load(session)
    if info.status == "missing":
        return None
    if loaded is None:
        with state.lock:
            state.counters.checkpoints_refused += 1
        return info.status
    from engine.runtime.llm import SessionState
    try:
        state.llm.import_session(session, SessionState(token_ids=loaded.token_ids,
                                                       tensors=loaded.tensors))
    except Exception:
        # The files verified but the engine would not take them (shape or dtype mismatch):
        # the checkpoint cannot serve this engine, so the request prefills in full instead.
        with state.lock:
            state.counters.checkpoints_refused += 1
        return "incompatible"
    with state.lock:
        state.counters.checkpoints_restored += 1
    return "restored"


def flush_sessions(state: ServerState) -> tuple[int, int]:
    """At shutdown: save every session used since its last save, whatever its length (the
    token threshold only spaces out automatic saves while serving). Returns (saved, failed)."""
    if state.checkpoints is None:
        return 0, 0
    saved = failed = 0
    held = set(state.llm.sessions())
    for key in state.take_dirty():
        if key not in held:
            continue  # evicted from the pool meanwhile: nothing left to save
        try:
            save_session(state, key)
            saved += 1
        except Exception:  # one bad session must not stop the others from being saved
            failed += 1
    return saved, failed
