"""Prometheus metrics on a private registry (never the process-global one).

Two families: the engine's own `engine_*` names, and vLLM's `vllm:*` names with a
`model_name` label, so that dashboards and autoscalers written for vLLM read this server too.
"""
from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_E2E_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300)


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, engine_status: Callable[[], dict] | None = None,
                 model_name: str = "assay-engine"):
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("engine_requests", "HTTP requests by route and status.",
                                ["route", "status"], registry=r)
        self.ttft = Histogram("engine_time_to_first_token_seconds",
                              "Time from request arrival to its first output token.",
                              buckets=_LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("engine_inter_token_latency_seconds",
                             "Time between consecutive output tokens of a request.",
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.kv_used = Gauge("engine_kv_pool_blocks_used", "KV pool blocks in use.", registry=r)
        self.kv_total = Gauge("engine_kv_pool_blocks_total", "KV pool blocks in all.",
                              registry=r)
        self.spec = Counter("engine_spec_decode_position_tokens",
                            "Speculative draft tokens by draft position.",
                            ["position", "kind"], registry=r)
        m = ["model_name"]
        self.v_running = Gauge("vllm:num_requests_running", "Requests in the running batch.",
                               m, registry=r).labels(model_name)
        self.v_waiting = Gauge("vllm:num_requests_waiting", "Requests waiting for a slot.",
                               m, registry=r).labels(model_name)
        self.v_kv = Gauge("vllm:kv_cache_usage_perc", "Fraction of KV cache blocks in use "
                          "(cached sessions included); 1 is full.", m,
                          registry=r).labels(model_name)
        self.v_prompt = Counter("vllm:prompt_tokens", "Prompt tokens of finished requests.",
                                m, registry=r).labels(model_name)
        self.v_gen = Counter("vllm:generation_tokens", "Output tokens of finished requests.",
                             m, registry=r).labels(model_name)
        self.v_ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.",
                                m, buckets=_LATENCY_BUCKETS, registry=r).labels(model_name)
        self.v_itl = Histogram("vllm:inter_token_latency_seconds", "Time between output tokens.",
                               m, buckets=_LATENCY_BUCKETS, registry=r).labels(model_name)
        self.v_e2e = Histogram("vllm:e2e_request_latency_seconds", "Request arrival to last "
                               "token.", m, buckets=_E2E_BUCKETS, registry=r).labels(model_name)
        self.v_drafts = Counter("vllm:spec_decode_num_draft_tokens", "Draft tokens proposed.",
                                m, registry=r).labels(model_name)
        self.v_accepted = Counter("vllm:spec_decode_num_accepted_tokens",
                                  "Draft tokens accepted.", m, registry=r).labels(model_name)
        self.v_accepted_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                                      "Draft tokens accepted, by draft position.",
                                      m + ["position"], registry=r)
        self.model_name = model_name
        self._engine_status = engine_status

    def observe_tokens(self, ttft_s: float | None, gaps_s: list[float]) -> None:
        if ttft_s is not None:
            self.ttft.observe(ttft_s)
            self.v_ttft.observe(ttft_s)
        for g in gaps_s:
            self.itl.observe(g)
            self.v_itl.observe(g)

    def observe_request(self, prompt_tokens: int, generation_tokens: int, e2e_s: float) -> None:
        self.v_prompt.inc(prompt_tokens)
        self.v_gen.inc(generation_tokens)
        self.v_e2e.observe(e2e_s)

    def observe_spec(self, spec: dict | None) -> None:
        if not spec:
            return
        for kind in ("attempted", "accepted"):
            for pos, n in enumerate(spec.get(kind) or []):
                if n:
                    self.spec.labels(position=str(pos), kind=kind).inc(n)
                    if kind == "attempted":
                        self.v_drafts.inc(n)
                    else:
                        self.v_accepted.inc(n)
                        self.v_accepted_pos.labels(self.model_name, str(pos)).inc(n)

    def render(self) -> bytes:
        if self._engine_status is not None:
            status = self._engine_status()
            pool = pool_usage(status)
            self.kv_used.set(pool["blocks_used"])
            self.kv_total.set(pool["blocks_total"])
            self.v_kv.set(pool["blocks_used"] / pool["blocks_total"] if pool["blocks_total"]
                          else 0.0)
            sched = status.get("scheduler") if isinstance(status.get("scheduler"), dict) \
                else status
            self.v_running.set(int(sched.get("active", 0) or 0))
            self.v_waiting.set(int(sched.get("pending", 0) or 0))
        return generate_latest(self.registry)


def pool_usage(status: dict) -> dict[str, int]:
    """Pool blocks from LLM.status(), whichever of the documented spellings it uses."""
    pool = status.get("pool") if isinstance(status.get("pool"), dict) else status
    used = pool.get("blocks_used", pool.get("used", 0))
    total = pool.get("blocks_total", pool.get("total", 0))
    return {"blocks_used": int(used or 0), "blocks_total": int(total or 0)}
