"""benchmark: C1 (one request at a time) decode tokens/s and time to first token at the lane's
fixed prompt and completion sizes, peak memory, and GPU power draw where a GPU exists (read with
nvidia-smi query flags only)."""

from __future__ import annotations

from gates.phases import PhaseFailed


def _power(rt) -> dict | None:
    r = rt.host.run("command -v nvidia-smi >/dev/null 2>&1 || exit 127; nvidia-smi "
                    "--query-gpu=index,power.draw,power.limit --format=csv,noheader,nounits", timeout=60)
    if r.exit_code != 0:
        return None
    out = {}
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            out[parts[0]] = {"draw_w": parts[1], "limit_w": parts[2]}
    return out


def _bandwidth(rt, out: dict) -> dict:
    """Decode against the copy bandwidth measured on the same GPU in the same phase: each decoded
    token reads every weight once, so tokens/s x weight bytes over copy bytes/s is the fraction of
    the memory ceiling the engine reaches (docs/PERFORMANCE.md uses the same measure)."""
    if rt.engine is not None:
        rt.stop(rt.engine)   # the lane's own engine leaves the GPU to the measurement
    http = rt.bench_http()
    copy = rt.probe("copy-bandwidth", {"bytes": 1 << 30, "runs": 20})
    status = rt.probe("request", {**http, "method": "GET", "path": "/v1/engine/status"})
    weights = ((status.get("body") or {}).get("runtime", {}).get("admission", {})).get("weights_bytes")
    tok_s = out.get("decode_tok_s_median")
    fraction = round(tok_s * weights / copy["bytes_per_s"], 4) if tok_s and weights and copy.get("bytes_per_s") else None
    return {"copy": copy, "weights_bytes": weights, "decode_fraction_of_copy": fraction}


def run(rt) -> dict:
    s = rt.spec.setting
    speed = bool(rt.bench_model)
    if speed and rt.engine is not None:
        rt.stop(rt.engine)
    out = rt.probe("bench", rt.bench_http({"prompt_tokens": s("bench_prompt_tokens"),
                                           "completion_tokens": s("bench_completion_tokens"), "runs": s("bench_runs"),
                                           "repeats": s("bench_repeats")}))
    out.update({"concurrency": 1, "prompt_tokens_target": s("bench_prompt_tokens"),
                "completion_tokens_target": s("bench_completion_tokens"), "power": _power(rt),
                "model": rt.shared.get("bench_model") if speed else "lane"})
    if rt.spec.lane_kind.device == "cuda":
        out["bandwidth"] = _bandwidth(rt, out)
    if speed:
        out["stop"] = rt.stop_bench_engine()
    if not out["ok_runs"]:
        raise PhaseFailed("no benchmark run completed", out)
    return out
