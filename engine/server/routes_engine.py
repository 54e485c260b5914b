"""Operational routes: /health, /metrics, /v1/engine/status, /v1/engine/checkpoints."""
from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from engine.server.api_models import CheckpointRequest
from engine.server.errors import APIError
from engine.server.metrics import pool_usage
from engine.server.request_body import parse_body
from engine.server.sessions import save_session
from engine.server.tenancy import request_tenant, session_key

router = APIRouter()


@router.get("/health")
async def health():
    return {"status": "ok"}


@router.get("/metrics")
async def metrics(request: Request):
    m = request.app.state.server.metrics
    return Response(await run_in_threadpool(m.render), media_type=m.content_type)


def _memory_now(device: str) -> dict:
    import resource
    out = {"process_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if device == "cuda":
        import torch
        free, total = torch.cuda.mem_get_info()
        out.update(device_free_bytes=int(free), device_total_bytes=int(total),
                   torch_allocated_bytes=int(torch.cuda.memory_allocated()))
    return out


def engine_status(st) -> dict:
    raw = st.llm.status() or {}
    sched = raw.get("scheduler") or {}
    with st.lock:
        counters = dict(vars(st.counters))
        inflight = st.inflight
    ck = None
    if st.checkpoints is not None:
        ck = {"enabled": True, "bytes": st.checkpoints.total_bytes(),
              "quota_bytes": st.checkpoints.quota_bytes,
              "require_origin_auth": st.profile["checkpoints"]["require_origin_auth"]}
    return {
        "identity": st.identity,
        "runtime": {"device": st.admission["device"], "memory": {
                        "free_bytes_at_start": st.admission["free_bytes"],
                        "free_source": st.admission["free_source"],
                        **_memory_now(st.admission["device"])},
                    "admission": st.admission, "uptime_s": round(time.time() - st.started_at, 3),
                    "draining": st.draining},
        "scheduler": {"active": sched.get("active", raw.get("active", 0)),
                      "pending": sched.get("pending", raw.get("pending", 0)),
                      "inflight_http": inflight},
        "cache": {**pool_usage(raw), "sessions": len(st.llm.sessions())},
        "warmup": raw.get("warmup"),
        "decode": {k: raw.get(k) for k in ("cuda_graphs", "cuda_graph_error", "persistent_decode",
                                           "persistent_decode_off")},
        "speculative": {"backend": st.profile["speculative"]["backend"],
                        "draft_tokens": st.profile["speculative"]["draft_tokens"],
                        "counters": raw.get("spec")},
        "checkpoints": ck,
        "responses": st.responses.stats(),
        "counters": counters,
        "kernels": _kernels(),
    }


def _kernels() -> dict | None:
    """Where the Triton kernels came from (engine.kernels.aot); None without Triton."""
    from engine.kernels.aot import status
    return status()


@router.get("/v1/engine/status")
async def status(request: Request):
    return await run_in_threadpool(engine_status, request.app.state.server)


def _store(st):
    if st.checkpoints is None:
        raise APIError("checkpoints_disabled", "no checkpoint directory is configured")
    return st.checkpoints


@router.post("/v1/engine/checkpoints")
async def save_checkpoint(request: Request):
    st = request.app.state.server
    body = await parse_body(request, CheckpointRequest, st.profile["max_request_bytes"])
    _store(st)
    session = session_key(request_tenant(request), body.session)
    if st.session_busy(session):
        raise APIError("session_busy", "a request is using this session; save it when it "
                       "finishes", "session")
    m = await run_in_threadpool(save_session, st, session)
    return {"session": body.session, "status": "available", "tokens": m["token_count"],
            "bytes": m["bytes"], "created_at": m["created_at"]}


@router.get("/v1/engine/checkpoints/{session}")
async def get_checkpoint(session: str, request: Request):
    store = _store(request.app.state.server)
    info = await run_in_threadpool(store.inspect, session_key(request_tenant(request), session))
    return info.public(session)


@router.delete("/v1/engine/checkpoints/{session}")
async def delete_checkpoint(session: str, request: Request):
    store = _store(request.app.state.server)
    deleted = await run_in_threadpool(store.delete, session_key(request_tenant(request), session))
    return {"session": session, "deleted": deleted}
