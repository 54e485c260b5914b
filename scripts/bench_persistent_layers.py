"""`python3 scripts/bench_persistent_layers.py`: how much of a batch-1 decode step's time outside
the weight stream would one persistent kernel take back?

The 8B decode step at batch 1 runs at 0.77-0.79 of the copy bandwidth (docs/perf/engine.md).
Its projections stream the weights through cuBLAS at 3.2-4.2 TB/s, and between them some ten
small kernels a layer (norms, RoPE, attention, SwiGLU's gate, split-K reduces) each pay a launch,
a ramp and a drain on the step's critical path. Faster GEMV kernels and L2 prefetches were
measured and did not pay; what is left is fewer, longer kernels.

This script measures that lead before anyone builds it into the engine. It runs a layer's four
products (qkv, o, gate_up, down of the 8B config, bf16 weights stored column-major as the engine
keeps them on CUDA) and the elementwise work between them (residual adds, RMSNorm, SwiGLU's
gate), and with a config's attn field each layer's RoPE, KV write and attention over a cache of
--context tokens (batch 1), for 32 layers of distinct weights, two ways, each captured in a CUDA
graph:

- kernels: cuBLAS products and the engine's compiled elementwise ops (engine.model.fused), one
  kernel each, as the engine's step runs them; with attention, the engine's own RoPE/KV-write and
  paged decode attention kernels (engine.kernels.ops) over the same cache, its blocks in order;
- persistent: one Triton kernel for all 32 layers, a fixed grid of programs resident together,
  split-K partial sums, the reduces, norms and the gate done by the programs between grid-wide
  barriers (an atomic counter), the norms recomputed by every program that needs them; the
  weights read by plain loads or by the copy engine through tensor descriptors, the products
  by FMAs or as tensor-core dots (a config's kind field), the qkv and gate_up reduces done by
  their own phases or folded into the products that read them (its fold field).

It prints µs a layer, the weight bytes' rate, the barriers' time alone, each phase's µs a layer
(program 0 stamps the GPU's global timer after every barrier), and the final residuals'
difference (the two sum in different orders, so they agree to bf16 rounding, not bit for bit).
A config whose programs cannot all be resident at once (by the compiled kernel's registers and
shared memory) is skipped, and each barrier gives up after a bounded spin, the run then reported
as failed: a grid that is not all resident would otherwise never pass its first barrier.

Needs a CUDA GPU. A script, not one of engine/benchmarks: any commit under engine/ moves the
engine's source date, and with it the wheel's bytes that the gpu-h200 evidence binds.
Figures and the command that made them: docs/perf/engine.md."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))         # the sibling kernel module
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # the engine from this checkout
from engine.model import fused  # noqa: E402
from persistent_layers_kernel import (EPS, HEAD_DIM, HEADS, HIDDEN, INTER, KV_HEADS, PAGE,  # noqa: E402
                                      PHASES, PHASES_ATTN, QKV, _layers_kernel, config_list, parse_config)

class Weights:
    def __init__(self, layers: int, dev, context: int = 1024):
        g = torch.Generator(device=dev).manual_seed(0)
        mk = lambda *shape: (torch.randn(*shape, device=dev, generator=g) * 0.02).to(torch.bfloat16)  # noqa: E731
        self.layers = layers
        self.qkv, self.o = mk(layers, HIDDEN, QKV), mk(layers, HIDDEN, HIDDEN)
        self.gu, self.down = mk(layers, HIDDEN, 2 * INTER), mk(layers, INTER, HIDDEN)
        self.n1 = (1 + 0.1 * torch.randn(layers, HIDDEN, device=dev, generator=g)).to(torch.bfloat16)
        self.n2 = (1 + 0.1 * torch.randn(layers, HIDDEN, device=dev, generator=g)).to(torch.bfloat16)
        # Attention's inputs: context cached tokens and the new one at position T - 1, in the
        # engine's bf16 paged layout [layer, block, PAGE, kv head, dim] with blocks in order (so
        # also one contiguous [layer, token, kv head, dim] run), and RoPE's cos/sin at T - 1 as the
        # engine casts its tables (to the model's dtype).
        self.T = context + 1
        blocks = -(-self.T // PAGE)
        self.TP = blocks * PAGE
        self.kc = torch.randn(layers, blocks, PAGE, KV_HEADS, HEAD_DIM, device=dev, generator=g).to(torch.bfloat16)
        self.vc = torch.randn(layers, blocks, PAGE, KV_HEADS, HEAD_DIM, device=dev, generator=g).to(torch.bfloat16)
        from engine.benchmarks.decode import LLAMA_8B
        from engine.model.config import ModelConfig
        from engine.model.rope import cos_sin_table
        cos, sin = cos_sin_table(ModelConfig.from_dict(LLAMA_8B, where="bench config 8b"), self.T, dev)
        self.cos, self.sin = cos[self.T - 1].to(torch.bfloat16), sin[self.T - 1].to(torch.bfloat16)
        self.tables = torch.arange(blocks, dtype=torch.int32, device=dev).view(1, blocks)
        self.seq_lens = torch.tensor([self.T], dtype=torch.int32, device=dev)
        self.slots = torch.tensor([self.T - 1], dtype=torch.int64, device=dev)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.qkv, self.o, self.gu, self.down))


def kernels_step(w: Weights, r: torch.Tensor) -> torch.Tensor:
    """The layers as the engine's step runs them on CUDA, minus attention: returns the residual."""
    res = r.to(torch.bfloat16).view(1, HIDDEN)
    h = fused.rms_norm(res, w.n1[0], EPS)
    for i in range(w.layers):
        qkv = h @ w.qkv[i]
        a = qkv[:, :HIDDEN] @ w.o[i]
        h, res = fused.add_rms_norm(a, res, w.n2[i], EPS)
        m = fused.silu_mul(h @ w.gu[i], INTER) @ w.down[i]
        nxt = w.n1[i + 1] if i + 1 < w.layers else w.n1[0]
        h, res = fused.add_rms_norm(m, res, nxt, EPS)
    return res


def kernels_step_attn(w: Weights, r: torch.Tensor) -> torch.Tensor:
    """kernels_step with each layer's attention as the engine's step runs it on CUDA: RoPE and the
    KV write in one kernel, then the paged decode attention (engine.kernels.ops, Triton)."""
    from engine.kernels import ops as kernel_ops
    ops = kernel_ops.select(r.device)
    res = r.to(torch.bfloat16).view(1, HIDDEN)
    h = fused.rms_norm(res, w.n1[0], EPS)
    for i in range(w.layers):
        qkv = (h @ w.qkv[i]).view(1, HEADS + 2 * KV_HEADS, HEAD_DIM)
        q = ops.rope_write_kv(qkv, HEADS, KV_HEADS, w.cos.view(1, -1), w.sin.view(1, -1), w.kc[i], w.vc[i], None, None,
                              w.slots)
        o = ops.paged_decode_attention(q, w.kc[i], w.vc[i], None, None, w.tables, w.seq_lens, HEAD_DIM ** -0.5)
        a = o.reshape(1, HIDDEN) @ w.o[i]
        h, res = fused.add_rms_norm(a, res, w.n2[i], EPS)
        m = fused.silu_mul(h @ w.gu[i], INTER) @ w.down[i]
        nxt = w.n1[i + 1] if i + 1 < w.layers else w.n1[0]
        h, res = fused.add_rms_norm(m, res, nxt, EPS)
    return res


class Persistent:
    def __init__(self, w: Weights, cfg: dict, dev):
        self.w, self.cfg = w, cfg
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.nprog = sms * cfg["per_sm"]
        smax = max(cfg["s_qkv"], cfg["s_o"], cfg["s_gu"], cfg["s_d"])
        self.part = torch.empty(smax * 2 * INTER, dtype=torch.float32, device=dev)
        self.part2 = torch.empty(smax * 2 * INTER, dtype=torch.float32, device=dev)
        self.qkv = torch.empty(QKV, dtype=torch.bfloat16, device=dev)
        self.gu = torch.empty(2 * INTER, dtype=torch.bfloat16, device=dev)
        self.sync = torch.zeros(2, dtype=torch.int32, device=dev)
        self.slots = 9 if cfg["attn"] else 8
        self.times = torch.zeros(w.layers * self.slots + 1, dtype=torch.int64, device=dev)
        self.ns = -(-w.T // cfg["split"])
        self.att_o = torch.empty(KV_HEADS * self.ns * 4 * HEAD_DIM, dtype=torch.float32, device=dev)
        self.att_ml = torch.empty(KV_HEADS * self.ns * 4 * 2, dtype=torch.float32, device=dev)
        from triton.tools.tensor_descriptor import TensorDescriptor
        block = [1, cfg["bk"], cfg["bn"]]
        self.descs = tuple(TensorDescriptor.from_tensor(t, block) for t in (w.qkv, w.o, w.gu, w.down))

    def resident(self, r: torch.Tensor) -> int:
        """Programs an SM that fit at once by the compiled kernel's registers and shared memory."""
        k = _layers_kernel.warmup(*self._args(r), grid=(self.nprog,), **self._meta())
        k._init_handles()
        threads = 32 * self.cfg["warps"]
        by_regs = 65536 // max(1, k.n_regs * threads)
        props = torch.cuda.get_device_properties(r.device)
        smem_sm = getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
        by_smem = smem_sm // max(1, k.metadata.shared + 1024) if k.metadata.shared else 32
        return min(by_regs, by_smem, 2048 // threads, 32)

    def _args(self, r):
        w = self.w
        return (r, w.n1, w.n2, w.qkv, w.o, w.gu, w.down, self.part, self.part2, self.qkv, self.gu, self.sync, self.times,
                *self.descs, w.kc, w.vc, w.cos, w.sin, self.att_o, self.att_ml, HEAD_DIM ** -0.5, w.tables,
                w.seq_lens, w.slots)

    def _meta(self, barriers_only: bool = False):
        c = self.cfg
        return dict(LAYERS=self.w.layers, H=HIDDEN, Q=QKV, I=INTER, S_QKV=c["s_qkv"], S_O=c["s_o"], S_GU=c["s_gu"],
                    S_D=c["s_d"], BK=c["bk"], BN=c["bn"], BR=128, eps=EPS, BARRIERS_ONLY=barriers_only,
                    KIND=c["kind"], FOLD=bool(c["fold"]), ATTN=bool(c["attn"]), T=self.w.T, TP=self.w.TP, NS=self.ns,
                    NS2=triton.next_power_of_2(self.ns), MERGE_IN_O=c["attn"] == 2, SLOTS=self.slots, PAGED=False,
                    SPLIT=c["split"],
                    num_warps=c["warps"], num_stages=c["stages"])

    def phase_us(self) -> dict:
        """µs a layer of each phase (what ends at its barrier), from program 0's stamps of the last run."""
        t = self.times.cpu().double()
        d = (t[1:] - t[:-1]).view(self.w.layers, self.slots) / 1e3
        return dict(zip(PHASES_ATTN if self.cfg["attn"] else PHASES, d.mean(0).tolist()))

    def step(self, r: torch.Tensor, barriers_only: bool = False) -> None:
        self.sync.zero_()
        _layers_kernel[(self.nprog,)](*self._args(r), **self._meta(barriers_only))


def graph_us(fn, reps: int) -> float:
    """µs a replay of fn captured in a CUDA graph (median of reps timed replays after warm-up).
    Timed by CUDA events around each replay, not by the host's clock around a synchronize (as
    engine.benchmarks.projections.graph_time does): the documented figures are GPU time."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 scripts/bench_persistent_layers.py")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--context", type=int, default=1024, help="cached tokens before the new one (attention configs)")
    ap.add_argument("--configs", type=config_list,
                    default="2,64,128,16,8,1,8,4,3,3,1;2,64,128,16,8,1,8,4,3,3,1,1",
                    help="semicolon-separated P,BK,BN,S_QKV,S_O,S_GU,S_D,WARPS[,STAGES[,KIND[,FOLD[,ATTN]]]] "
                         "(parse_config)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    configs = args.configs
    if not torch.cuda.is_available():
        raise SystemExit("bench_persistent_layers needs a CUDA GPU")
    dev = torch.device("cuda")
    fused.enable_compile()
    w = Weights(args.layers, dev, args.context)
    r0 = torch.randn(HIDDEN, device=dev).to(torch.bfloat16).float()   # the residual holds bf16 values
    rows, expect = [], {}
    # The baselines: the layers as kernels, without and (when a config asks) with attention.
    for attn in sorted({bool(c["attn"]) for c in configs}):
        step = kernels_step_attn if attn else kernels_step
        r_k = r0.clone()
        us = graph_us(lambda: step(w, r_k), args.reps)
        way = "kernels + attention" if attn else "kernels"
        rows.append(dict(way=way, config=None, us_layer=us / args.layers, tb_s=w.nbytes() / (us * 1e-6) / 1e12))
        print(f"{way}: {us / args.layers:.1f} us a layer, {rows[-1]['tb_s']:.2f} TB/s of weights", flush=True)
        expect[attn] = step(w, r0.clone()).float().view(-1)
        if not torch.isfinite(expect[attn]).all():
            raise SystemExit(f"the {way}' residual is not finite: the weights' scale is off")
    for cfg in configs:
        p = Persistent(w, cfg, dev)
        r = r0.clone()
        fits = p.resident(r)
        label = ",".join(str(v) for v in cfg.values())
        if fits < cfg["per_sm"]:
            print(f"persistent {label}: skipped, {fits} programs an SM fit at once", flush=True)
            rows.append(dict(way="persistent", config=cfg, skipped=f"{fits} programs an SM fit"))
            continue
        p.step(r)
        torch.cuda.synchronize()
        failed = bool(p.sync[1].item())
        ref = expect[bool(cfg["attn"])]
        diff = ((r - ref).abs().max() / ref.abs().max()).item() if torch.isfinite(r).all() else float("inf")
        us = graph_us(lambda: p.step(r), args.reps) if not failed else float("nan")
        phases = p.phase_us() if not failed else {}
        bar = graph_us(lambda: p.step(r, barriers_only=True), args.reps) if not failed else float("nan")
        failed = failed or bool(p.sync[1].item())
        rows.append(dict(way="persistent", config=cfg, programs=p.nprog, us_layer=us / args.layers,
                         tb_s=w.nbytes() / (us * 1e-6) / 1e12, barriers_us_layer=bar / args.layers,
                         max_rel_diff=diff, barrier_timeout=failed, phases_us_layer=phases))
        barriers = 6 if cfg["fold"] and not cfg["attn"] else (8 if cfg["attn"] == 2 else 9 if cfg["attn"] else 8)
        print(f"persistent {label}: {us / args.layers:.1f} us a layer ({rows[-1]['tb_s']:.2f} TB/s), of which its "
              f"{barriers} barriers alone {bar / args.layers:.1f}; max rel diff to "
              f"{'kernels + attention' if cfg['attn'] else 'kernels'} {diff:.2e}; barrier timeout {failed}", flush=True)
        if phases:
            print("    phases, us a layer: " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                           layers=args.layers, context=args.context, weight_gb=w.nbytes() / 1e9, rows=rows), f,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
