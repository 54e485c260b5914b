"""The CPU decode step of the reference model under torch.compile, against the engine's flat loop
(engine.runtime.cpu_decode): what fusing the step's small ops into Inductor's C++ kernels would
buy, and what compiling costs.

Variants, each the same batch-1 step over the same caches (one sequence holding --context tokens):
  flat loop   the engine's decode step on the CPU;
  whole step  the step's layers as one compiled graph (one Dynamo call a step; the products stay
              MKL calls, the norms, RoPE, SwiGLU's gate and the KV write become fused loops);
  per layer   one compiled graph a layer, called once per layer (Dynamo's call overhead per layer).
Each compiled variant's first call (the compile) is timed and its logits compared with the flat
loop's; then rounds alternate the variants' order, --steps steps each. Inductor keeps compiled
graphs in its cache directory (under the system temp directory), so a second run compiles
faster than the first on a machine.

    .venv/bin/python scripts/bench_cpu_compiled_step.py [--context 200] [--rounds 8] [--steps 15] [--json out.json]

A llama-style model without q/k norms or a qkv bias (the reference model) over a float32 pool.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engine.kernels.decode_plan import decode_plan  # noqa: E402
from engine.model import fused  # noqa: E402
from engine.runtime.cpu_decode import CpuDecode, _param  # noqa: E402
from scripts.bench_cpu_decode_step import one_sequence  # noqa: E402


class CompiledStep(CpuDecode):
    """CpuDecode.forward's arithmetic, with the layers compiled whole (per_layer False) or one
    graph a layer; the step's host work (the KV plan) stays outside."""

    def __init__(self, model, per_layer: bool):
        super().__init__(model)
        cfg = model.cfg
        if cfg.qk_norm or model.layers[0].attn.qkv.bias is not None:
            sys.exit("this script compiles a llama-style layer: no q/k norms, no qkv bias")
        self.eps = cfg.rms_norm_eps
        self.layer = torch.compile(self._layer, dynamic=True, fullgraph=True) if per_layer else self._layer
        self.body = self._body if per_layer else torch.compile(self._body, dynamic=True, fullgraph=True)

    def _layer(self, h, residual, cos, sin, slots, row0: int, n: int, kc, vc, qkv_w, o_w, gu_w, down_w,
               mlp_norm_w, next_w):
        hq, kvh, d = self.h, self.kvh, self.d
        qkv = F.linear(h, qkv_w).view(1, hq + 2 * kvh, d)
        qk = fused._rope(qkv[:, :hq + kvh], cos, sin)
        q, k, v = qk[:, :hq], qk[:, hq:], qkv[:, hq + kvh:]
        kc.view(-1, kvh, d).index_copy_(0, slots, k)
        vc.view(-1, kvh, d).index_copy_(0, slots, v)
        keys = kc.view(-1, kvh, d)[row0:row0 + n].transpose(0, 1)[None]
        values = vc.view(-1, kvh, d)[row0:row0 + n].transpose(0, 1)[None]
        o = F.scaled_dot_product_attention(q.reshape(1, kvh, hq // kvh, d), keys, values, scale=self.sm_scale)
        h, residual = fused._add_rms_norm(F.linear(o.reshape(1, hq * d), o_w), residual, mlp_norm_w, self.eps)
        m = F.linear(fused._silu_mul(F.linear(h, gu_w), self.inter), down_w)
        return fused._add_rms_norm(m, residual, next_w, self.eps)

    def _body(self, input_ids, positions, slots, row0: int, n: int, kcs, vcs, params, embed_w, lm_w, cos_t,
              sin_t, first_w):
        residual = F.embedding(input_ids, embed_w)
        cos, sin = cos_t[positions], sin_t[positions]
        h = fused._rms_norm(residual, first_w, self.eps)
        for p, kc, vc in zip(params, kcs, vcs):
            h, residual = self.layer(h, residual, cos, sin, slots, row0, n, kc, vc, *p)
        return F.linear(h, lm_w)

    @torch.inference_mode()
    def forward(self, input_ids, positions, meta, caches):
        plan = decode_plan(meta.block_tables, meta.seq_lens, caches[0][0].shape[1])
        span = plan.spans[0]
        if len(plan.spans) != 1 or span is None or span.row0 is None:
            sys.exit("one sequence over contiguous blocks only")
        # (qkv, o, gate_up, down, mlp norm, next norm) weights of each layer (_step_params' order)
        params = [(p[1], p[6], p[8], p[10], p[11], p[12]) for p in self._step_params()]
        cos_t, sin_t = self.model._rope_tables(torch.float32)
        return self.body(input_ids, positions, meta.slot_mapping, span.row0, span.n,
                         [c[0] for c in caches], [c[1] for c in caches], params, _param(self.model.embed),
                         _param(self.model.lm_head), cos_t, sin_t, _param(self.model.layers[0].attn_norm)).float()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_cpu_compiled_step.py")
    ap.add_argument("--model", default=".assay/models/smollm2-135m-instruct")
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    llm, seq = one_sequence(args.model, args.context)
    runner = llm.runner
    flat = runner.cpu_decode
    paths = {"flat loop": flat, "whole step": CompiledStep(llm.model, per_layer=False),
             "per layer": CompiledStep(llm.model, per_layer=True)}
    out = {"context": args.context, "threads": torch.get_num_threads(), "compile_s": {}, "max_abs_logit_diff": {}}
    with torch.inference_mode():
        runner.cpu_decode = flat
        want = runner.decode([seq]).clone()
        for name in ("whole step", "per layer"):
            runner.cpu_decode = paths[name]
            t0 = time.perf_counter()
            got = runner.decode([seq]).clone()
            out["compile_s"][name] = time.perf_counter() - t0
            out["max_abs_logit_diff"][name] = float((got - want).abs().max())
            same = bool(torch.equal(got.argmax(-1), want.argmax(-1)))
            print(f"{name}: first call (compile) {out['compile_s'][name]:.1f} s; logits within "
                  f"{out['max_abs_logit_diff'][name]:.2e} of the flat loop's, same greedy token: {same}", flush=True)
        ms = {name: [] for name in paths}
        for r in range(args.rounds):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for name in order:
                runner.cpu_decode = paths[name]
                for _ in range(3):
                    runner.decode([seq])
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    runner.decode([seq])
                ms[name].append((time.perf_counter() - t0) / args.steps * 1e3)
    runner.cpu_decode = flat
    llm.stop()
    med = {name: statistics.median(v) for name, v in ms.items()}
    for name, v in ms.items():
        print(f"{name:11s} {med[name]:7.2f} ms a step (rounds {min(v):.2f}-{max(v):.2f}); "
              f"flat loop / this {med['flat loop'] / med[name]:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({**out, "ms": ms, "median_ms": med}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
