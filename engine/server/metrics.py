"""Prometheus metrics on a private registry (never the process-global one)."""
from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, engine_status: Callable[[], dict] | None = None):
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("engine_requests", "HTTP requests by route and status.",
                                ["route", "status"], registry=self.registry)
        self.ttft = Histogram("engine_time_to_first_token_seconds",
                              "Time from request arrival to its first output token.",
                              buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.itl = Histogram("engine_inter_token_latency_seconds",
                             "Time between consecutive output tokens of a request.",
                             buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.kv_used = Gauge("engine_kv_pool_blocks_used", "KV pool blocks in use.",
                             registry=self.registry)
        self.kv_total = Gauge("engine_kv_pool_blocks_total", "KV pool blocks in all.",
                              registry=self.registry)
        self.spec = Counter("engine_spec_decode_position_tokens",
                            "Speculative draft tokens by draft position.",
                            ["position", "kind"], registry=self.registry)
        self._engine_status = engine_status

    def observe_tokens(self, ttft_s: float | None, gaps_s: list[float]) -> None:
        if ttft_s is not None:
            self.ttft.observe(ttft_s)
        for g in gaps_s:
            self.itl.observe(g)

    def observe_spec(self, spec: dict | None) -> None:
        if not spec:
            return
        for kind in ("attempted", "accepted"):
            for pos, n in enumerate(spec.get(kind) or []):
                if n:
                    self.spec.labels(position=str(pos), kind=kind).inc(n)

    def render(self) -> bytes:
        if self._engine_status is not None:
            pool = pool_usage(self._engine_status())
            self.kv_used.set(pool["blocks_used"])
            self.kv_total.set(pool["blocks_total"])
        return generate_latest(self.registry)


def pool_usage(status: dict) -> dict[str, int]:
    """Pool blocks from LLM.status(), whichever of the documented spellings it uses."""
    pool = status.get("pool") if isinstance(status.get("pool"), dict) else status
    used = pool.get("blocks_used", pool.get("used", 0))
    total = pool.get("blocks_total", pool.get("total", 0))
    return {"blocks_used": int(used or 0), "blocks_total": int(total or 0)}
