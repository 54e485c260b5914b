"""`python3 scripts/bench_l2_prefetch.py`: does reading the next projection's weight into L2
with the Hopper bulk prefetch speed up a batch-1 decode?

A batch-1 decode step streams the weights, and between the projections memory sits idle while
RoPE, the KV write, attention and the norms run. An earlier try read the o weight into L2 behind
attention with a load kernel over all SMs (engine commit 7244a77), and every variant was slower:
its thousands of programs took the SMs from the small kernels it meant to hide behind. The
`cp.async.bulk.prefetch.L2` instruction (sm_90) asks the tensor memory accelerator of the SM
that issues it to bring a byte range into L2 without returning data to the SM, so a handful of
one-warp programs can ask for tens of megabytes.

`--part gemv` (the default) times the o projection's product (1 x 4096 @ 4096 x 4096, bf16,
over the engine's column-major layout; in the decode profile cuBLAS runs it split over K, then a
reduce) after L2 was flushed, against after the bulk prefetch of its weight at several sizes a
lane, a spin of about 100 us in between so that every prefetch has landed, the variants
alternating: the most a prefetch behind attention could give that projection.

`--part decode` puts the prefetches into the 8B model's real decode step (engine.benchmarks.decode's
model, engines and timing, the engine's code patched in this process only), one engine per
setting (DECODE_SETTINGS), their captured graphs replayed in turns, and checks that every
engine's greedy tokens equal the first's: a prefetch by a kernel of its own before RoPE, by
extra programs of the RoPE/KV-write kernel, or on a side stream that the captured graph runs
as a branch beside RoPE and attention; o's weight alone or with the head of the next weights.

Needs an sm_90 GPU. Figures and the commands that made them: docs/perf/engine.md. A script, not
one of engine/benchmarks: any commit under engine/ moves the engine's source date, and with it
the wheel's bytes that the gpu-h200 evidence binds."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # the engine from this checkout
from engine.kernels.triton_kv_write import _rope_write_kv_kernel  # noqa: E402

CHUNKS_PER_PROGRAM = 32        # one warp a program, one bulk prefetch a lane


@triton.jit
def _prefetch_lanes(src, nbytes, j, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """Program j's BLOCK lanes each ask L2 for one CHUNK of src's first nbytes; returns zeros."""
    idx = (j * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    left = nbytes - idx * CHUNK
    size = tl.minimum(tl.maximum(left, 0), CHUNK).to(tl.int32) // 16 * 16   # the size must be a multiple of 16
    ptrs = src.to(tl.pointer_type(tl.int8)) + tl.where(size > 0, idx * CHUNK, 0)
    # The prefetch returns nothing; the asm's zero result, summed and stored, keeps the op in.
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptrs, size], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _l2_prefetch_kernel(src, sink, nbytes, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    r = _prefetch_lanes(src, nbytes, pid, CHUNK, BLOCK)
    tl.store(sink + pid, tl.sum(r, axis=0))


def l2_prefetch(t: torch.Tensor, nbytes: int | None, chunk: int, sink: torch.Tensor) -> None:
    """Ask L2 for the first nbytes (all by default) of t's storage, chunk bytes a lane."""
    total = t.numel() * t.element_size()
    n = total if nbytes is None else min(int(nbytes), total)
    grid = triton.cdiv(triton.cdiv(n, chunk), CHUNKS_PER_PROGRAM)
    # t's data_ptr is its storage's first byte in both projection layouts (a transposed view
    # starts where the contiguous tensor does); the kernel counts in bytes from there.
    _l2_prefetch_kernel[(grid,)](t, sink, n, CHUNK=chunk, BLOCK=CHUNKS_PER_PROGRAM, num_warps=1)


def _flush_l2(buf: torch.Tensor) -> None:
    buf.zero_()


def gemv_part(dev, chunks: list[int], reps: int) -> list[dict]:
    """µs of the o product cold (L2 flushed), and after its weight was prefetched (spin between)."""
    k = n = 4096
    w = torch.randn(k, n, dtype=torch.bfloat16, device=dev)
    x = torch.randn(1, k, dtype=torch.bfloat16, device=dev)
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    sink = torch.zeros(4096, dtype=torch.int32, device=dev)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one(chunk: int | None) -> float:
        _flush_l2(flush)
        if chunk is not None:
            l2_prefetch(w, None, chunk, sink)
        torch.cuda._sleep(200_000)            # ~100 us at ~2 GHz: every prefetch has landed
        e0.record()
        x @ w
        e1.record()
        torch.cuda.synchronize()
        return e0.elapsed_time(e1) * 1e3

    rows = []
    variants = [None] + chunks
    for v in variants:
        one(v)
    times = {v: [] for v in variants}
    for _ in range(reps):
        for v in variants:
            times[v].append(one(v))
    for v in variants:
        rows.append(dict(part="gemv", prefetch="none" if v is None else f"chunk {v // 1024} KB",
                         us_median=statistics.median(times[v]), us_min=min(times[v])))
    return rows


# ---- the decode part: prefetches inside the 8B model's captured decode step ----------------------

FUSED_LANES = 128              # the RoPE/KV-write kernel runs 4 warps: one bulk prefetch a lane


@triton.jit
def _rope_write_prefetch_kernel(qkv_ptr, cos_ptr, sin_ptr, q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, slot_ptr,
                                stride_t, stride_h, stride_ct, stride_st, stride_qt, stride_qh,
                                num_heads, num_kv_heads, head_dim, vc_sb, vc_st, vc_sh, vc_sd,
                                n_tokens, pf_a, bytes_a, progs_a, pf_b, bytes_b, sink,
                                IS_INT8: tl.constexpr, PAGE: tl.constexpr, BLOCK_HQ: tl.constexpr,
                                BLOCK_HK: tl.constexpr, BLOCK_D: tl.constexpr, HALF: tl.constexpr,
                                CHUNK: tl.constexpr, LANES: tl.constexpr):
    """The engine's RoPE + KV-write kernel for programs below n_tokens; the programs after them
    only ask L2 for weights (pf_a's first bytes_a, then pf_b's first bytes_b): no extra launch."""
    pid = tl.program_id(0)
    if pid < n_tokens:
        _rope_write_kv_kernel(qkv_ptr, cos_ptr, sin_ptr, q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, slot_ptr,
                              stride_t, stride_h, stride_ct, stride_st, stride_qt, stride_qh,
                              num_heads, num_kv_heads, head_dim, vc_sb, vc_st, vc_sh, vc_sd,
                              IS_INT8, PAGE, BLOCK_HQ, BLOCK_HK, BLOCK_D, HALF)
    else:
        j = pid - n_tokens
        if j < progs_a:
            r = _prefetch_lanes(pf_a, bytes_a, j, CHUNK, LANES)
        else:
            r = _prefetch_lanes(pf_b, bytes_b, j - progs_a, CHUNK, LANES)
        tl.store(sink + j, tl.sum(r, axis=0))


class DecodePrefetch:
    """What the patched decode step prefetches; read while an engine captures its CUDA graphs, so
    each engine built under one setting keeps it. Settings: sep_o (o's weight by a kernel of its
    own before RoPE), fused_o (o's weight by extra programs of the RoPE/KV-write kernel), side_o
    (o's weight by a kernel on a side stream, a branch of the captured graph that the main
    stream joins only at the next prefetch or the step's end), b_mb (with fused_o or side_o:
    also gate_up's first MB), heads_mb (after the o, gate_up and down products, the first MB of
    the next product's weight, by a kernel of its own, on the side stream with side_o), chunk_kb
    (bytes a lane, for the kernels of their own; default --chunks-kb's first)."""

    def __init__(self, model, chunk: int, dev):
        self.setting: dict = {}
        self.chunk = chunk
        self.sink = torch.zeros(1 << 16, dtype=torch.int32, device=dev)
        self.side = torch.cuda.Stream(dev)     # made before any capture: a stream of the graphs' branches
        self.pending = False
        self.current = None
        self.attn_targets: dict[int, tuple] = {}
        self.next_weight: dict[int, torch.Tensor] = {}
        layers = list(model.layers)
        for i, layer in enumerate(layers):
            self.attn_targets[id(layer.attn)] = (layer.attn.o.weight, layer.mlp.gate_up.weight)
            self.next_weight[id(layer.attn.o)] = layer.mlp.gate_up.weight
            self.next_weight[id(layer.mlp.gate_up)] = layer.mlp.down.weight
            if i + 1 < len(layers):
                self.next_weight[id(layer.mlp.down)] = layers[i + 1].attn.qkv.weight

    def install(self) -> None:
        from engine.kernels import triton_kv_write
        from engine.model.projection import Projection
        from engine.model.transformer import Attention, Transformer
        model_fwd = Transformer.forward
        me, rope_write = self, triton_kv_write.rope_write_kv_triton
        project, forward = Attention._project_rope_write, Projection.forward

        def project_rope_write(attn, *args):
            me.current = attn
            return project(attn, *args)

        def patched_rope_write(qkv, h, kvh, cos, sin, kc, vc, ks, vs, slots):
            o_w, gu_w = me.attn_targets.get(id(me.current), (None, None))
            if o_w is None or not qkv.is_cuda or not me.setting:
                return rope_write(qkv, h, kvh, cos, sin, kc, vc, ks, vs, slots)
            if me.setting.get("sep_o"):
                l2_prefetch(o_w, None, me.lane_bytes(), me.sink)
            if me.setting.get("side_o"):
                me.on_side([(o_w, None), (gu_w, me.setting.get("b_mb", 0) << 20)])
            if not me.setting.get("fused_o"):
                return rope_write(qkv, h, kvh, cos, sin, kc, vc, ks, vs, slots)
            return me.fused(qkv, h, kvh, cos, sin, kc, vc, ks, vs, slots, o_w, gu_w)

        def projection_forward(proj, x):
            y = forward(proj, x)
            mb = me.setting.get("heads_mb", 0)
            nxt = me.next_weight.get(id(proj))
            if mb and nxt is not None and x.is_cuda:
                if me.setting.get("side_o"):
                    me.on_side([(nxt, mb << 20)])
                else:
                    l2_prefetch(nxt, mb << 20, me.lane_bytes(), me.sink)
            return y

        def model_forward(model, *args, **kwargs):
            out = model_fwd(model, *args, **kwargs)
            if me.pending:          # every branch joins the main stream before the step ends
                torch.cuda.current_stream().wait_stream(me.side)
                me.pending = False
            return out

        Attention._project_rope_write = project_rope_write
        triton_kv_write.rope_write_kv_triton = patched_rope_write
        Projection.forward = projection_forward
        Transformer.forward = model_forward

    def lane_bytes(self) -> int:
        return self.setting.get("chunk_kb", self.chunk // 1024) * 1024

    def on_side(self, targets) -> None:
        """Prefetch kernels for targets [(tensor, bytes or None)] on the side stream, after the
        main stream's work so far; the main stream first joins the previous branch."""
        main = torch.cuda.current_stream()
        if self.pending:
            main.wait_stream(self.side)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            for t, n in targets:
                if n is None or n > 0:
                    l2_prefetch(t, n, self.lane_bytes(), self.sink)
        self.pending = True

    def fused(self, qkv, h, kvh, cos, sin, kc, vc, ks, vs, slots, o_w, gu_w):
        n, _, d = qkv.shape
        q = torch.empty((n, h, d), dtype=qkv.dtype, device=qkv.device)
        is_int8 = kc.dtype == torch.int8
        bytes_a = o_w.numel() * o_w.element_size()
        bytes_b = min(self.setting.get("b_mb", 0) << 20, gu_w.numel() * gu_w.element_size())
        per = self.chunk * FUSED_LANES
        progs_a, progs_b = triton.cdiv(bytes_a, per), triton.cdiv(bytes_b, per)
        _rope_write_prefetch_kernel[(n + progs_a + progs_b,)](
            qkv, cos, sin, q, kc, vc, ks if is_int8 else kc, vs if is_int8 else vc, slots,
            qkv.stride(0), qkv.stride(1), cos.stride(0), sin.stride(0), q.stride(0), q.stride(1),
            h, kvh, d, *vc.stride(), n, o_w, bytes_a, progs_a, gu_w, bytes_b, self.sink,
            IS_INT8=is_int8, PAGE=kc.shape[1], BLOCK_HQ=triton.next_power_of_2(h),
            BLOCK_HK=triton.next_power_of_2(kvh), BLOCK_D=triton.next_power_of_2(d), HALF=d // 2,
            CHUNK=self.chunk, LANES=FUSED_LANES, num_warps=4)
        return q


DECODE_SETTINGS = {
    "none": {},
    "sep-o": {"sep_o": True},
    "fused-o": {"fused_o": True},
    "fused-o-gu8": {"fused_o": True, "b_mb": 8},
    "fused-o-gu16": {"fused_o": True, "b_mb": 16},
    "fused-o-heads4": {"fused_o": True, "heads_mb": 4},
    "fused-o-heads8": {"fused_o": True, "heads_mb": 8},
    "side-o-16k": {"side_o": True, "chunk_kb": 16},
    "side-o-64k": {"side_o": True, "chunk_kb": 64},
    "side-o-gu8": {"side_o": True, "chunk_kb": 16, "b_mb": 8},
    "side-o-gu16": {"side_o": True, "chunk_kb": 16, "b_mb": 16},
    "side-o-heads8": {"side_o": True, "chunk_kb": 16, "heads_mb": 8},
    "blas-lt": {"blas": "cublaslt"},                # no prefetch: cuBLASLt's heuristics pick the products' kernels
    "blas-lt-side-o-64k": {"blas": "cublaslt", "side_o": True, "chunk_kb": 64},
}


def decode_part(dev, settings: list[str], chunk: int, rounds: int, shapes: list[tuple[int, int]],
                steps: int) -> list[dict]:
    """The 8B decode step (engine.benchmarks.decode's model and timing) under each prefetch
    setting, one engine each, timed in turns; and each engine's greedy tokens from one prompt."""
    from engine.benchmarks.decode import LLAMA_8B, fill_random_kv, hf_model, synthetic_decode
    from engine.benchmarks.harness import BenchLLM
    from engine.model.config import ModelConfig
    from engine.model.weights import build_model
    from engine.runtime.sampling import SamplingParams

    cfg = ModelConfig.from_dict(LLAMA_8B, where="bench config 8b")
    hf = hf_model(LLAMA_8B, dev)
    max_ctx = max(c for _, c in shapes)
    max_len = max_ctx + steps + 64
    model = build_model(cfg, dict(hf.state_dict()), torch.bfloat16, dev, max_len, "hf model")
    del hf
    torch.cuda.empty_cache()
    pf = DecodePrefetch(model, chunk, dev)
    pf.install()
    cap = max(b * (c + steps + 80) for b, c in shapes)
    engines = {}
    default_blas = torch.backends.cuda.preferred_blas_library()
    for name in settings:
        pf.setting = DECODE_SETTINGS[name]
        # The products' kernels are chosen when the graphs are captured, under this setting.
        torch.backends.cuda.preferred_blas_library(pf.setting.get("blas", default_blas))
        llm = BenchLLM(cfg, model, kv_dtype="bf16", device=dev, kv_capacity_tokens=cap,
                       max_concurrency=max(b for b, _ in shapes), max_model_len=max_len)
        fill_random_kv(llm)
        engines[name] = llm
        print(f"decode: engine for {name} captured", flush=True)
    pf.setting = {}
    torch.backends.cuda.preferred_blas_library(default_blas)
    times = {(n, b, c): [] for n in settings for b, c in shapes}
    for r in range(rounds):
        for b, c in shapes:
            for name in (settings if r % 2 == 0 else settings[::-1]):
                _, rep = synthetic_decode(engines[name], b, c, steps)
                times[(name, b, c)].append(rep * 1e6)
        print(f"decode: round {r + 1}/{rounds} done", flush=True)
    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, cfg.vocab_size, (40,), generator=g).tolist()
    tokens = {n: engines[n].generate(prompt, SamplingParams(max_new_tokens=24, ignore_eos=True)).token_ids
              for n in settings}
    rows = []
    for b, c in shapes:
        base = statistics.median(times[(settings[0], b, c)])
        for name in settings:
            t = times[(name, b, c)]
            rows.append(dict(part="decode", setting=name, batch=b, context=c, graph_us_median=statistics.median(t),
                             graph_us_min=min(t), vs_first=base / statistics.median(t),
                             same_tokens=tokens[name] == tokens[settings[0]]))
    for llm in engines.values():
        llm.stop()
    return rows


def shape_list(text: str) -> list[tuple[int, int]]:
    """--shapes: batch x context pairs, e.g. 1x1024,8x1024."""
    try:
        out = [tuple(int(v) for v in x.split("x")) for x in text.split(",")]
    except ValueError:
        out = []
    if not out or any(len(x) != 2 or min(x) < 1 for x in out):
        raise argparse.ArgumentTypeError(f"expected comma-separated BATCHxCONTEXT, got {text!r}")
    return out


def setting_list(text: str) -> list[str]:
    names = [x for x in text.split(",") if x]
    bad = [x for x in names if x not in DECODE_SETTINGS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown settings {bad or text!r}: choose from {', '.join(DECODE_SETTINGS)}")
    return names


def chunk_sizes(text: str) -> list[int]:
    """--chunks-kb: positive whole KB (so multiples of the 16 bytes a bulk prefetch moves)."""
    try:
        kb = [int(x) for x in text.split(",")]
    except ValueError:
        kb = []
    if not kb or any(x < 1 for x in kb):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive whole KB, got {text!r}")
    return [x * 1024 for x in kb]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 scripts/bench_l2_prefetch.py")
    ap.add_argument("--chunks-kb", type=chunk_sizes, default="16,64,256,1024",
                    help="bulk prefetch sizes a lane, KB, comma-separated")
    ap.add_argument("--reps", type=int, default=20, help="rounds, each timing every variant once")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--part", choices=["gemv", "decode"], default="gemv",
                    help="gemv: the o product cold and prefetched; decode: the 8B decode step under prefetch settings")
    ap.add_argument("--settings", type=setting_list, default=",".join(DECODE_SETTINGS),
                    help="decode: the prefetch settings, the first the baseline")
    ap.add_argument("--shapes", type=shape_list, default="1x1024,8x1024,1x32768", help="decode: BATCHxCONTEXT list")
    ap.add_argument("--steps", type=int, default=64, help="decode: graph replays timed per measurement")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        raise SystemExit("bench_l2_prefetch needs an sm_90 GPU (cp.async.bulk.prefetch.L2)")
    dev = torch.device("cuda")
    if args.part == "gemv":
        rows = gemv_part(dev, args.chunks_kb, args.reps)
        for r in rows:
            print(f"gemv o, prefetch {r['prefetch']}: median {r['us_median']:.1f} us, min {r['us_min']:.1f}", flush=True)
    else:
        rows = decode_part(dev, args.settings, args.chunks_kb[0], args.reps, args.shapes, args.steps)
        for r in rows:
            print(f"decode b{r['batch']} ctx {r['context']} {r['setting']:<16} graph median {r['graph_us_median']:8.1f} us"
                  f" min {r['graph_us_min']:8.1f}  {r['vs_first']:.3f}x  same tokens {r['same_tokens']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                           rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
