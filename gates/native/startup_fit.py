"""startup-fit: the engine's startup admission figures (bytes available, headroom, weights, KV
capacity), and a profile too big for the host refused with exit 2 (probed with an oversize KV
pool, which no host holds, before the lane's own engine starts)."""

from __future__ import annotations

from gates.phases import PhaseFailed
from gates.runtime import EngineProcess

OVERSIZE_KV_TOKENS = 1 << 36   # tokens: petabytes of KV on any model


def run(rt) -> dict:
    # A kind with a speed model proves the fit on that model (the size users serve); the lane's own
    # model then starts in the next phase.
    speed = bool(rt.bench_model)
    if speed:
        oversize = rt.launch("oversize", rt.bench_profile(kv_capacity=OVERSIZE_KV_TOKENS),
                             model=rt.ensure_bench_model(), timeout=300)
    else:
        oversize = rt.launch("oversize", rt.profile(kv_capacity=OVERSIZE_KV_TOKENS), timeout=300)
    if isinstance(oversize, EngineProcess):
        rt.kill(oversize)
        raise PhaseFailed("the engine started with a profile that cannot fit (it must refuse with exit 2)",
                          {"oversize_exit_code": None})
    log = rt.log_tail(rt.path("run", "oversize.log"))
    refused = {"oversize_exit_code": oversize, "oversize_refusal_named": "admission does not fit" in log}
    if oversize != 2 or not refused["oversize_refusal_named"]:
        raise PhaseFailed(f"an oversize profile ended with exit {oversize}, not 2 with an admission refusal",
                          {**refused, "log_tail": log})
    engine = rt.ensure_bench_engine() if speed else rt.ensure_engine()
    status = rt.probe("request", {**rt.bench_http(), "method": "GET", "path": "/v1/engine/status"})
    if status["status"] != 200:
        raise PhaseFailed("GET /v1/engine/status did not answer 200", {"status": status["status"]})
    body = status["body"]
    admission = body["runtime"]["admission"]
    identity = body["identity"]
    keys = ("device", "free_bytes", "free_source", "weights_bytes", "kv_bytes_per_token", "kv_capacity_tokens",
            "kv_bytes", "headroom_bytes", "kv_capacity_mode", "admitted", "prefill_chunk", "prefill_bytes")
    out = {**refused, "ready_s": engine.ready_s, "model": rt.shared.get("bench_model") if speed else "lane", "admission": {k: admission.get(k) for k in keys},
           "engine_version": identity.get("engine_version"), "package_sha256": identity.get("package_sha256"),
           "model_sha256": identity.get("model_sha256"), "profile_sha256": identity.get("profile_sha256")}
    need = admission["weights_bytes"] + admission["kv_bytes"] + admission["headroom_bytes"]
    out["fits_bytes"] = {"needed": need, "free": admission["free_bytes"], "margin": admission["free_bytes"] - need}
    if not admission.get("admitted") or need > admission["free_bytes"]:
        raise PhaseFailed("the admission figures do not add up to a fit", out)
    if identity.get("engine_version") != rt.version:
        raise PhaseFailed(f"the served engine reports version {identity.get('engine_version')}, not {rt.version}", out)
    expected = rt.shared.get("package_sha256")
    if expected is None:
        from gates.install import wheel_package_sha256
        expected = rt.shared["package_sha256"] = wheel_package_sha256(rt.wheel)
    if identity.get("package_sha256") != expected:
        raise PhaseFailed("the served engine's package digest is not the wheel's", out)
    if speed:
        out["stop"] = rt.stop_bench_engine()   # its GPU memory goes back before the lane's model is served
    return out
