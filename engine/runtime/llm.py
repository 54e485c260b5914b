"""LLM: the in-process engine API (model + pool + scheduler) driven by a background thread."""
from __future__ import annotations

import threading
from concurrent.futures import Future
from contextlib import contextmanager

import torch

from engine.errors import EngineError
from engine.kernels import ops as kernel_ops
from engine.model import fused
from engine.model.config import ModelConfig
from engine.model.dtypes import resolve_device, resolve_dtype, resolve_kv_dtype
from engine.model.tokenizer import Tokenizer
from engine.model.weights import load_model
from engine.runtime.block_manager import BlockManager
from engine.runtime.cpu_threads import on_fresh_thread
from engine.runtime.kv_pool import KVPool, blocks_for
from engine.runtime.model_runner import ModelRunner
from engine.runtime.prefill_chunk import default_prefill_chunk
from engine.runtime.request import RequestHandle
from engine.runtime.sampling import SamplingParams
from engine.runtime.scheduler import Scheduler
from engine.runtime.scheduling_lock import SchedulingLock
from engine.runtime.sequence import GenerationResult, Sequence
from engine.runtime.session_store import SessionState, SessionStore
from engine.runtime.spec_ngram import MAX_DRAFT
from engine.runtime.warmup import WarmupReport, warm_prefill

__all__ = ["LLM", "SessionState", "default_prefill_chunk", "graph_buckets"]

GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
SPEC_GRAPH_ROWS = GRAPH_BATCH_SIZES + (64, 128)   # n-gram windows: draft_tokens + 1 rows a sequence
# attention=: "auto" lets engine.kernels.ops.backend decide (ENGINE_KERNELS, then the device).
ATTENTION_BACKENDS = ("auto", "torch", "triton")


def graph_buckets(max_concurrency: int, rows_per_seq: int = 1) -> list[int]:
    """Row counts to capture: up to the first bucket that holds max_concurrency sequences of
    rows_per_seq rows each (n-gram speculation feeds a window of draft_tokens + 1 rows),
    at most the largest listed size; a step with more rows runs eagerly."""
    rows = max_concurrency * rows_per_seq
    sizes = GRAPH_BATCH_SIZES if rows_per_seq == 1 else SPEC_GRAPH_ROWS
    out = [b for b in sizes if b < rows]
    return out + [b for b in sizes if b >= rows][:1]


class LLM(SessionStore):
    """One model, one KV pool, one scheduling thread. See docs/INTERFACES.md (Engine)."""

    def __init__(self, model_dir, *, dtype="auto", kv_dtype="auto", device="auto", kv_budget_bytes=None,
                 kv_capacity_tokens=None, block_size=16, prefill_chunk=None, max_concurrency=8,
                 max_pending=64, pending_timeout_s=30.0, spec="none", draft_tokens=7,
                 max_model_len=None, cuda_graphs=True, attention="auto", compile_ops=None, warmup=None):
        if spec not in ("none", "ngram"):
            raise ValueError(f"spec must be 'none' or 'ngram', got {spec!r}")
        if attention not in ATTENTION_BACKENDS:
            raise ValueError(f"attention must be one of {ATTENTION_BACKENDS}, got {attention!r}")
        if not 1 <= int(draft_tokens) <= MAX_DRAFT:
            raise ValueError(f"draft_tokens must be 1..{MAX_DRAFT}, got {draft_tokens!r}")
        chunk = 1 if prefill_chunk is None else prefill_chunk         # None: default_prefill_chunk
        for name, val in (("block_size", block_size), ("prefill_chunk", chunk),
                          ("max_concurrency", max_concurrency), ("max_pending", max_pending)):
            if not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        self.device = resolve_device(device)
        parts = dict(model_dir=model_dir, dtype=dtype, max_model_len=max_model_len, kv_dtype=kv_dtype,
                     compile_ops=compile_ops, kv_budget_bytes=kv_budget_bytes,
                     kv_capacity_tokens=kv_capacity_tokens, block_size=block_size,
                     prefill_chunk=prefill_chunk, max_concurrency=max_concurrency, max_pending=max_pending,
                     pending_timeout_s=pending_timeout_s, spec=spec, draft_tokens=draft_tokens,
                     cuda_graphs=cuda_graphs, attention=attention, warmup=warmup)
        # On the CPU the loading's parallel ops run on a thread that ends, so that no OpenMP pool
        # of the caller's thread outlives them beside the scheduling thread's (cpu_threads).
        if self.device.type == "cpu":
            on_fresh_thread(self._build, **parts)
        else:
            self._build(**parts)
        self.spec, self.draft_tokens = spec, int(draft_tokens)
        self._cond = SchedulingLock()
        self._thread: threading.Thread | None = None
        self._running = False
        self._fatal: BaseException | None = None
        if self._warm_chunk is not None:
            self._start(warm=True)

    def _build(self, *, model_dir, dtype, max_model_len, kv_dtype, compile_ops, kv_budget_bytes,
               kv_capacity_tokens, block_size, prefill_chunk, max_concurrency, max_pending,
               pending_timeout_s, spec, draft_tokens, cuda_graphs, attention, warmup) -> None:
        """The model, the KV pool, the runner and the scheduler on self.device."""
        self.config, self.model, self.tokenizer = self._load(model_dir, dtype, max_model_len)
        self.dtype = self.model.embed.weight.dtype
        self.max_model_len = int(max_model_len or self.model.max_positions)
        self.kv_dtype = resolve_kv_dtype(kv_dtype, self.dtype)
        # Fused elementwise kernels: on by default on CUDA (process-wide; see engine.model.fused).
        self.compiled_ops = False
        if compile_ops or (compile_ops is None and self.device.type == "cuda"):
            self.compiled_ops = fused.enable_compile()
        if kv_budget_bytes is None and kv_capacity_tokens is None:
            kv_capacity_tokens = self._default_capacity(max_concurrency, block_size)
        num_blocks = blocks_for(self.config, block_size, self.kv_dtype, kv_budget_bytes, kv_capacity_tokens)
        self.pool = KVPool(self.config, num_blocks, block_size, self.kv_dtype, self.device)
        self.blocks = BlockManager(num_blocks, block_size)
        self.ops = kernel_ops.select(self.device, attention)
        if prefill_chunk is None:
            prefill_chunk = default_prefill_chunk(self.device.type, self.max_model_len)
        max_blocks = -(-self.max_model_len // block_size)
        self.runner = ModelRunner(self.model, self.pool, self.ops, max_blocks,
                                  cuda_graphs=cuda_graphs and self.device.type == "cuda",
                                  graph_batch_sizes=graph_buckets(
                                      max_concurrency, int(draft_tokens) + 1 if spec == "ngram" else 1))
        eos = set(self.config.eos_token_ids) | (self.tokenizer.eos_token_ids if self.tokenizer else set())
        self.scheduler = Scheduler(self.runner, self.blocks, max_concurrency=max_concurrency,
                                   max_pending=max_pending, pending_timeout_s=float(pending_timeout_s),
                                   prefill_chunk=prefill_chunk, spec=spec, draft_tokens=int(draft_tokens),
                                   eos_token_ids=eos, max_model_len=self.max_model_len)
        # warmup None: on CUDA only, where first passes compile and load kernels (runtime.warmup).
        # Run by the scheduling thread, started in __init__: torch keeps some of what the first
        # passes set up per thread (runtime.warmup says what).
        self.warmup: WarmupReport | None = None
        self._warm_chunk = prefill_chunk if warmup or (warmup is None and self.device.type == "cuda") else None

    @contextmanager
    def paused(self):
        """Hold the scheduling lock for the block: no step runs inside it, so requests submitted
        there stay pending and the pool and runner can be used consistently from this thread."""
        with self._cond:
            yield

    def _load(self, model_dir, dtype, max_model_len):
        """(config, Transformer on self.device, Tokenizer) from a model directory."""
        cfg = ModelConfig.from_dir(model_dir)
        compute = resolve_dtype(dtype, cfg.torch_dtype)
        max_len = int(max_model_len or cfg.max_position_embeddings)
        config, model = load_model(model_dir, compute, self.device, max_len)
        return config, model, Tokenizer(model_dir, config.eos_token_ids)

    def _default_capacity(self, max_concurrency: int, block_size: int) -> int:
        tokens = max_concurrency * self.max_model_len
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            per_token = self.config.kv_bytes_per_token(torch.empty((), dtype=self.kv_dtype).element_size(),
                                                       4 if self.kv_dtype == torch.int8 else 0)
            tokens = min(tokens, int(free * 0.5) // per_token)
        return max(tokens, block_size)

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> "LLM":
        return self._start(warm=False)

    def _start(self, warm: bool) -> "LLM":
        """Start the scheduling thread if none runs; with warm, it serves the prefill warm-up first
        and this returns once that is done, raising what the warm-up raised (the thread stopped)."""
        done: Future | None = Future() if warm else None
        with self._cond:
            if self._thread is None:
                self._running = True
                self._thread = threading.Thread(target=self._loop, args=(done,), name="engine-scheduler",
                                                daemon=True)
                self._thread.start()
            elif done is not None:
                raise EngineError("the warm-up runs first on a new scheduling thread; one already runs")
        if done is not None:
            try:
                done.result()
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()
        t, self._thread = self._thread, None
        if t is not None:
            t.join(timeout)
            if t.is_alive():
                raise EngineError(f"scheduler thread did not stop within {timeout}s")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _warm(self, done: Future) -> bool:
        """The prefill warm-up on this (the scheduling) thread, under the lock, before any request."""
        with self._cond:
            try:
                self.warmup = warm_prefill(self.runner, self.blocks, self._warm_chunk, self.max_model_len,
                                           self.config.vocab_size)
            except BaseException as e:  # noqa: BLE001 - handed to the constructing thread
                done.set_exception(e)
                return False
        done.set_result(self.warmup)
        return True

    def _loop(self, warm: Future | None = None) -> None:
        if warm is not None and not self._warm(warm):
            return
        while True:
            with self._cond:
                while self._running and not self.scheduler.has_work():
                    self._cond.wait(0.05)
                if not self._running:
                    break
                try:
                    self.scheduler.step()
                # One request's own faults are caught inside step() and fail it alone; what
                # reaches here (a batched forward pass) belongs to no one request: fail every
                # request rather than hang its caller.
                except BaseException as e:
                    self._fatal = e
                    for seq in list(self.scheduler.active) + list(self.scheduler.pending):
                        seq.finish(None, e)
                    self.scheduler.active.clear()
                    self.scheduler.pending.clear()
                    self.blocks.reset()
            # Outside the lock: a submit or status read waiting for it goes before the next step.
            self._cond.step_aside()
        with self._cond:   # nothing may wait forever on a stopped engine
            for seq in list(self.scheduler.active) + list(self.scheduler.pending):
                seq.finish("cancelled")
            self.scheduler.active.clear()
            self.scheduler.pending.clear()

    # requests ---------------------------------------------------------------------------------
    def submit(self, prompt_ids, params: SamplingParams | None = None, session: str | None = None) -> RequestHandle:
        params = params or SamplingParams()
        ids = [int(t) for t in prompt_ids]
        if not ids:
            raise ValueError("prompt_ids is empty: a request needs at least one prompt token")
        bad = [t for t in ids if not 0 <= t < self.config.vocab_size]
        if bad:
            raise ValueError(f"prompt_ids hold ids outside the vocabulary [0, {self.config.vocab_size}): {bad[:5]}")
        seq = Sequence(ids, params, session, self.draft_tokens)
        self.start()
        with self._cond:
            self.scheduler.add(seq)
            self._cond.notify_all()
        return RequestHandle(seq, self._wake)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def generate(self, prompt_ids, params: SamplingParams | None = None, session: str | None = None,
                 timeout: float | None = None) -> GenerationResult:
        return self.submit(prompt_ids, params, session).result(timeout)

    def status(self) -> dict:
        with self._cond:
            s = self.scheduler.status()
        graphs = self.runner.graphs
        s.update(kv_dtype=str(self.kv_dtype).replace("torch.", ""), dtype=str(self.dtype).replace("torch.", ""),
                 device=str(self.device), block_size=self.pool.block_size, spec_mode=self.spec,
                 attention=self.ops.name,
                 cuda_graphs=self.runner.graphs is not None, compiled_ops=self.compiled_ops,
                 cuda_graph_error=self.runner.graph_error,
                 persistent_decode=graphs is not None and graphs.persistent is not None,
                 persistent_decode_off=None if graphs is None else graphs.persistent_off,
                 warmup=None if self.warmup is None else {"passes": [list(p) for p in self.warmup.passes],
                                                          "seconds": round(self.warmup.seconds, 3)})
        return s
