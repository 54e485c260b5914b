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


def run(rt) -> dict:
    s = rt.spec.setting
    out = rt.probe("bench", rt.http({"prompt_tokens": s("bench_prompt_tokens"),
                                     "completion_tokens": s("bench_completion_tokens"), "runs": s("bench_runs")}))
    out.update({"concurrency": 1, "prompt_tokens_target": s("bench_prompt_tokens"),
                "completion_tokens_target": s("bench_completion_tokens"), "power": _power(rt)})
    if not out["ok_runs"]:
        raise PhaseFailed("no benchmark run completed", out)
    return out
