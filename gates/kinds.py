"""Lane kinds: which phases of the native chain a kind runs, which model it serves, and the
sizes, floors and caps its phases use unless the lane's `qualify` table overrides them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The native chain, in order. `restore` is always last and always runs (gates/qualify.py).
NATIVE_CHAIN = ("preflight", "install", "startup-fit", "protocol", "pressure-protocol", "context", "restart",
                "security", "client-turn", "benchmark", "restore")

# Settings every kind has; each kind overrides some. Sizes are tokens unless named otherwise.
BASE_SETTINGS: dict[str, Any] = {
    "disk_floor_mib": 2048,          # preflight: free disk where the lane works
    "max_hold_s": 900,               # restore: longest the window may hold the host
    "lease_stale_s": 120,            # a crashed holder's lease may be broken after this
    "max_context": 2048,             # serving profile: prompt + output per request
    "kv_capacity": 16384,            # serving profile: KV pool tokens
    "prefill_chunk": 256,
    "host_memory_mib": 8192,         # serving profile: the CPU budget admission checks against
    "max_concurrency": 4,            # the lane's limit; pressure-protocol fans out to it
    "max_pending": 4,
    "request_timeout_s": 600,
    "context_tokens": 1024,          # context: each prompt at least this long
    "context_depths": [0.9, 0.5, 0.1],  # deepest first: the later prompts reuse the shared prefix
    "context_answer_tokens": 16,
    "restart_tokens": 16,            # restart: tokens of the continuation compared with a cold run
    "bench_prompt_tokens": 128,
    "bench_completion_tokens": 32,
    "bench_runs": 3,
    "bench_repeats": 3,              # streams of each size a run; the fastest of each is used (gates/probes/bench.py)
    "pressure_tokens": 8,
    "pressure_busy_tokens": 32,      # the request that holds a session busy while a second one is refused
    "protocol_tokens": 12,
    "phase_timeout_s": 1200,
    "bench_model": None,             # speed phases' model: None serves the lane's; a preset of gates/probes/random_model.py
    "bench_max_context": 2048,       # its serving profile
    "bench_kv_capacity": 32768,
}


@dataclass(frozen=True)
class LaneKind:
    name: str
    phases: tuple[str, ...]
    model: str            # "tiny": made on the host by `python -m engine make-tiny-model`; "directory": the lane's model
    device: str           # the serving profile's device
    settings: dict[str, Any] = field(default_factory=dict)

    def defaults(self) -> dict[str, Any]:
        return {**BASE_SETTINGS, **self.settings}


KINDS: dict[str, LaneKind] = {
    # The tiny random model: it proves the wheel installs, starts, speaks the protocol, restarts
    # from its checkpoint bit-exactly and decodes; retrieval needs a trained model, so no context.
    "cpu-smoke": LaneKind(
        "cpu-smoke", ("preflight", "install", "startup-fit", "protocol", "restart", "benchmark", "restore"),
        model="tiny", device="cpu",
        settings={"max_context": 512, "kv_capacity": 4096, "host_memory_mib": 2048, "max_hold_s": 600,
                  "disk_floor_mib": 1024, "bench_prompt_tokens": 64}),
    # The real reference model (SmolLM2-135M-Instruct, max context 8,192): the whole chain, with
    # context prompts of at least 7,000 tokens.
    "cpu-reference": LaneKind(
        "cpu-reference", NATIVE_CHAIN, model="directory", device="cpu",
        settings={"max_context": 8192, "kv_capacity": 24576, "prefill_chunk": 8192, "context_tokens": 7000,
                  "max_hold_s": 1800, "phase_timeout_s": 3600}),
    # The whole chain on CUDA. Startup fit and the benchmark serve a Llama-3-8B-shaped model with
    # seeded random bf16 weights made on the GPU (the size users serve; 1,024-token prompts, batch
    # 1, measured against the copy bandwidth of the same GPU); context, restart and the rest serve
    # the reference model. GPU facts are read with nvidia-smi query flags only; nothing on the GPU
    # is ever set.
    "gpu": LaneKind(
        "gpu", NATIVE_CHAIN, model="directory", device="cuda",
        settings={"max_context": 8192, "kv_capacity": 65536, "prefill_chunk": 1024, "context_tokens": 7000,
                  "disk_floor_mib": 40960, "bench_prompt_tokens": 1024, "bench_completion_tokens": 256,
                  "bench_runs": 5, "bench_model": "llama-8b", "pressure_busy_tokens": 1024, "bench_max_context": 2048,
                  "bench_kv_capacity": 65536, "host_memory_mib": 65536,
                  "max_concurrency": 8, "max_pending": 8, "max_hold_s": 1800}),
}


def kind_of(name: str) -> LaneKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown lane kind {name!r}; known: {', '.join(KINDS)}") from None


def chain_for(kind: LaneKind, phases: list[str] | tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The phases a lane runs: its kind's, or a chosen subset in native order; restore always last."""
    chosen = tuple(phases) if phases else kind.phases
    unknown = [p for p in chosen if p not in NATIVE_CHAIN]
    if unknown:
        raise ValueError(f"unknown phase(s) {unknown}; the native chain is {', '.join(NATIVE_CHAIN)}")
    ordered = [p for p in NATIVE_CHAIN if p in chosen and p != "restore"]
    return (*ordered, "restore")
