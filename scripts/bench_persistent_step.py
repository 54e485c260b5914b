"""`python3 scripts/bench_persistent_step.py`: the 8B model's batch-1 decode step with its 32 layers
in one persistent kernel (scripts/persistent_layers_kernel.py, reading the engine's paged KV pool
through a block table), timed side by side with the engine's own captured step, in one process.

scripts/bench_persistent_layers.py compares the layers alone, over a cache of its own. This script
puts the kernel into a whole step over the engine's objects: engine.benchmarks.decode's 8B model
(random weights) and an engine over it (BenchLLM) whose KV pool holds random values, as that
benchmark fills it. The persistent step is the token's embedding row, the kernel (the layers'
weights copied into one tensor a kind for its descriptors; attention over the sequence's blocks;
the sequence length, slot and position read on the device), then the engine's final norm, its
logits projection and argmax, all captured in one CUDA graph. It prints both steps' ms, their
fraction of the copy bandwidth measured in the same run (engine.benchmarks.decode's measure: the
weights read once, embedding excluded, plus the sequence's KV, over the step's time), and how the
persistent step's logits compare with the engine's forward over the same inputs.

Since commit 4bf6df9 the engine's own batch-1 step on an sm_90 GPU is its persistent step
(engine/kernels/triton_persistent.py, what this prototype became), so the "engine" column is that
step; with ENGINE_PERSISTENT_DECODE=0 it is the layered step, the comparison of the figures from
before that commit. Needs an sm_90 GPU. A script, not one of engine/benchmarks: its variants are
experiments, and any commit under engine/ moves the wheel the gpu-h200 evidence binds. Figures and
the command: docs/perf/engine.md."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))         # the sibling kernel module and script
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # the engine from this checkout
import persistent_layers_kernel as layers  # noqa: E402
from bench_persistent_layers import graph_us  # noqa: E402
from engine.benchmarks.decode import (LLAMA_8B, decode_row, fill_random_kv, hf_model,  # noqa: E402
                                      weight_bytes)
from engine.benchmarks.harness import BenchLLM, copy_bandwidth  # noqa: E402
from engine.model import fused  # noqa: E402
from engine.model.config import ModelConfig  # noqa: E402
from engine.model.transformer import AttnMeta  # noqa: E402
from engine.model.weights import build_model  # noqa: E402
from engine.runtime.sampling import argmax_rows  # noqa: E402


class PersistentStep:
    """The batch-1 decode step of `model` over the pool of `llm` with the persistent kernel."""

    def __init__(self, model, llm, cfg: dict, context: int, max_len: int, like: "PersistentStep | None" = None):
        dev = llm.device
        self.model, self.cfg = model, cfg
        ls = list(model.layers)
        if like is not None:       # another config's step over the same model: its stacked weights
            self.wqkv, self.wo, self.wgu, self.wd, self.n1, self.n2 = like.wqkv, like.wo, like.wgu, like.wd, like.n1, like.n2
        else:
            # Column-major weights [in, out] stacked a kind: the kernel's TMA descriptors span the layers.
            self.wqkv = torch.stack([layer.attn.qkv.weight.t() for layer in ls]).contiguous()
            self.wo = torch.stack([layer.attn.o.weight.t() for layer in ls]).contiguous()
            self.wgu = torch.stack([layer.mlp.gate_up.weight.t() for layer in ls]).contiguous()
            self.wd = torch.stack([layer.mlp.down.weight.t() for layer in ls]).contiguous()
            self.n1 = torch.stack([layer.attn_norm.weight for layer in ls]).contiguous()
            self.n2 = torch.stack([layer.mlp_norm.weight for layer in ls]).contiguous()
        from triton.tools.tensor_descriptor import TensorDescriptor
        block = [1, cfg["bk"], cfg["bn"]]
        self.descs = tuple(TensorDescriptor.from_tensor(t, block) for t in (self.wqkv, self.wo, self.wgu, self.wd))
        pool = llm.pool
        self.kc, self.vc = pool.k, pool.v                        # [layers, blocks, PAGE, kv heads, dim]
        self.tp = pool.k.shape[1] * pool.k.shape[2]
        # One sequence of context cached tokens and the new one, on the pool's first blocks.
        self.T = context + 1
        blocks = -(-self.T // layers.PAGE)
        self.table = torch.arange(blocks, dtype=torch.int32, device=dev)
        self.lens = torch.tensor([self.T], dtype=torch.int32, device=dev)
        self.slot = torch.tensor([self.T - 1], dtype=torch.int64, device=dev)
        self.pos = torch.tensor([self.T - 1], dtype=torch.int64, device=dev)
        self.token = torch.tensor([17], dtype=torch.int64, device=dev)
        cos_t, sin_t = model._rope_tables(torch.bfloat16)
        self.cos, self.sin = cos_t.contiguous(), sin_t.contiguous()
        self.max_ns = -(-max_len // cfg["split"])
        smax = max(cfg["s_qkv"], cfg["s_o"], cfg["s_gu"], cfg["s_d"])
        f32 = dict(dtype=torch.float32, device=dev)
        self.part, self.part2 = torch.empty(smax * 2 * layers.INTER, **f32), torch.empty(smax * 2 * layers.INTER, **f32)
        self.qkv = torch.empty(layers.QKV, dtype=torch.bfloat16, device=dev)
        self.gu = torch.empty(2 * layers.INTER, dtype=torch.bfloat16, device=dev)
        self.sync = torch.zeros(2, dtype=torch.int32, device=dev)
        self.times = torch.zeros(len(ls) * 9 + 1, dtype=torch.int64, device=dev)
        self.att_o = torch.empty(layers.KV_HEADS * self.max_ns * 4 * layers.HEAD_DIM, **f32)
        self.att_ml = torch.empty(layers.KV_HEADS * self.max_ns * 4 * 2, **f32)
        self.r = torch.empty(layers.HIDDEN, **f32)
        self.nprog = torch.cuda.get_device_properties(dev).multi_processor_count * cfg["per_sm"]
        self.ids = torch.zeros(1, dtype=torch.int64, device=dev)

    def _launch(self) -> None:
        c = self.cfg
        self.sync.zero_()
        layers._layers_kernel[(self.nprog,)](
            self.r, self.n1, self.n2, self.wqkv, self.wo, self.wgu, self.wd, self.part, self.part2, self.qkv, self.gu,
            self.sync, self.times, *self.descs, self.kc, self.vc, self.cos, self.sin, self.att_o, self.att_ml,
            layers.HEAD_DIM ** -0.5, self.table, self.lens, self.slot,
            LAYERS=len(self.model.layers), H=layers.HIDDEN, Q=layers.QKV, I=layers.INTER, S_QKV=c["s_qkv"],
            S_O=c["s_o"], S_GU=c["s_gu"], S_D=c["s_d"], BK=c["bk"], BN=c["bn"], BR=128, eps=self.model.norm.eps,
            BARRIERS_ONLY=False, KIND=c["kind"], FOLD=True, ATTN=True, T=self.T, TP=self.tp, NS=self.max_ns,
            NS2=triton.next_power_of_2(self.max_ns), MERGE_IN_O=False, SLOTS=9, PAGED=True,
            SPLIT=c["split"],
            num_warps=c["warps"], num_stages=c["stages"])

    def step(self) -> torch.Tensor:
        """Logits [1, vocab] (float32) of self.token at position T - 1; the greedy id into self.ids."""
        self.r.copy_(self.model.embed.weight[self.token].view(-1))     # the residual stream, bf16 values
        self._launch()
        h = fused.rms_norm(self.r.to(torch.bfloat16).view(1, -1), self.model.norm.weight, self.model.norm.eps)
        logits = self.model.lm_head(h).float()
        self.ids.copy_(argmax_rows(logits))
        return logits

    def phase_us(self) -> dict:
        """µs a layer of each phase of the last run, from program 0's timer stamps."""
        t = self.times.cpu().double()
        d = (t[1:] - t[:-1]).view(len(self.model.layers), 9) / 1e3
        return dict(zip(layers.PHASES_ATTN, d.mean(0).tolist()))

    def engine_logits(self, llm) -> torch.Tensor:
        """The engine's own forward of the same token at the same position over the same blocks."""
        meta = AttnMeta(slot_mapping=self.slot, decode=True, block_tables=self.table.view(1, -1), seq_lens=self.lens)
        return self.model(self.token, self.pos, meta, llm.runner.ops, llm.runner.caches).float()


def replay_ms(fn, reps: int) -> float:
    """ms a replay of fn captured in a CUDA graph, by CUDA events (median of reps)."""
    return graph_us(fn, reps) / 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 scripts/bench_persistent_step.py")
    ap.add_argument("--configs", type=layers.config_list, default="2,64,128,16,8,1,8,4,3,3,1,1,128",
                    help="the persistent kernel's configs, ';'-separated (persistent_layers_kernel.parse_config; "
                         "attn must be 1), each timed in every round beside the engine")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=64, help="the engine's timed scheduler steps (as engine.benchmarks.decode)")
    ap.add_argument("--reps", type=int, default=30, help="timed replays of the persistent step")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each timing both steps")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    if any(c["attn"] != 1 for c in args.configs):
        ap.error("--configs: attn must be 1 (the persistent step runs attention with its own merge phase)")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        raise SystemExit("bench_persistent_step needs an sm_90 GPU (TMA descriptors)")
    dev = torch.device("cuda")
    bw = copy_bandwidth(dev)
    hf = hf_model(LLAMA_8B, dev)
    cfg = ModelConfig.from_dict(LLAMA_8B, where="bench config 8b")
    max_len = args.context + args.steps + 64
    model = build_model(cfg, dict(hf.state_dict()), torch.bfloat16, dev, max_len, "hf model")
    del hf
    torch.cuda.empty_cache()
    wbytes = weight_bytes(model)
    llm = BenchLLM(cfg, model, kv_dtype="bf16", device=dev, kv_capacity_tokens=2 * (max_len + 16),
                   max_concurrency=1, max_model_len=max_len)
    fill_random_kv(llm)
    want = None
    steps, results = [], []
    for c in args.configs:
        ps = PersistentStep(model, llm, c, args.context, max_len, like=steps[0] if steps else None)
        want = ps.engine_logits(llm) if want is None else want
        got = ps.step()
        torch.cuda.synchronize()
        diff = ((got - want).abs().max() / want.abs().max()).item()
        same_argmax = int(got.argmax()) == int(want.argmax())
        print(f"config {c}: one step over the same inputs: logits max rel diff {diff:.2e}, same argmax {same_argmax}",
              flush=True)
        steps.append(ps)
        results.append(dict(config=c, logits_max_rel_diff=diff, same_argmax=same_argmax, persistent_step_ms=[]))
    kv_bytes = steps[0].T * cfg.kv_bytes_per_token(2, 0)
    engine_ms = []
    for r in range(args.rounds):
        row = decode_row(llm, "assay", "bf16", 1, args.context, args.steps, wbytes, bw)
        engine_ms.append(row["graph_ms"])
        for ps, res in zip(steps, results):
            res["persistent_step_ms"].append(replay_ms(ps.step, args.reps))
        print(f"round {r + 1}: engine graph {engine_ms[-1]:.3f} ms, persistent steps "
              + ", ".join(f"{res['persistent_step_ms'][-1]:.3f}" for res in results) + " ms", flush=True)
    llm.stop()
    e = statistics.median(engine_ms)
    frac = lambda ms: (wbytes + kv_bytes) / (ms * 1e-3) / bw  # noqa: E731
    print(f"copy {bw / 1e9:.0f} GB/s, weights {wbytes / 1e9:.2f} GB: engine step {e:.3f} ms ({frac(e):.3f} of the "
          f"copy)", flush=True)
    for ps, res in zip(steps, results):
        p = statistics.median(res["persistent_step_ms"])
        res.update(persistent_fraction=frac(p), persistent_phases_us_layer=ps.phase_us(), vs_engine=e / p)
        print(f"  config {res['config']}: persistent step {p:.3f} ms ({frac(p):.3f}), {e / p:.3f}x; phases, us a "
              "layer: " + ", ".join(f"{k} {v:.1f}" for k, v in res["persistent_phases_us_layer"].items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                           context=args.context, copy_gb_s=bw / 1e9, weight_bytes=wbytes, engine_graph_ms=engine_ms,
                           engine_fraction=frac(e), configs=results), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
