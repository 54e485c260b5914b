"""`python -m engine.benchmarks.decode`: decode throughput side by side with the GPU's copy bandwidth and
with transformers' generate, in one run. Prints a table; --json writes the numbers.

Decode rows fill the KV of each sequence with random values up to the context length (no
prefill: at 32K it would dominate the run) and time the engine's scheduler steps."""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from engine.benchmarks.harness import BenchLLM, copy_bandwidth, sync
from engine.model import fused
from engine.model.config import ModelConfig
from engine.model.layout import set_projection_layout
from engine.model.weights import build_model
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams
from engine.runtime.sequence import Sequence, Status

LLAMA_8B = dict(model_type="llama", vocab_size=128256, hidden_size=4096, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336, rms_norm_eps=1e-5,
                rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=False,
                rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                torch_dtype="bfloat16")
TINY = dict(LLAMA_8B, vocab_size=1024, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=512)


def hf_model(cfg_dict: dict, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    keys = {k: v for k, v in cfg_dict.items() if k not in ("model_type", "torch_dtype")}
    hcfg = LlamaConfig(**keys)
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(hcfg)
    finally:
        torch.set_default_dtype(prev)
    return model.eval()


def synthetic_decode(llm: LLM, batch: int, ctx: int, steps: int, warmup: int = 5) -> tuple[float, float | None]:
    """Seconds per decode step for `batch` sequences each holding `ctx` tokens of KV, and seconds
    per replay of the captured decode graph alone (None without CUDA graphs)."""
    sched = llm.scheduler
    g = torch.Generator().manual_seed(0)
    seqs = []
    for _ in range(batch):
        prompt = torch.randint(0, llm.config.vocab_size, (ctx,), generator=g).tolist()
        seq = Sequence(prompt, SamplingParams(max_new_tokens=steps + warmup + 2, ignore_eos=True), None, 1)
        assert sched._reserve(seq), "KV pool too small for the benchmark"
        seq.kv_len, seq.status, seq.t_admit = ctx - 1, Status.DECODE, time.monotonic()
        sched.active.append(seq)
        seqs.append(seq)
    with llm.paused():                 # the scheduling thread must not step at the same time
        for _ in range(warmup):
            sched.step()
        sync(llm.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            sched.step()
        sync(llm.device)
        dt = (time.perf_counter() - t0) / steps
        replay_s = None
        graphs = llm.runner.graphs
        if graphs is not None and graphs.fits(batch):   # the captured step alone, back to back
            g = graphs.graphs[next(s for s in graphs.sizes if s >= batch)]
            g.replay()
            sync(llm.device)
            t0 = time.perf_counter()
            for _ in range(steps):
                g.replay()
            sync(llm.device)
            replay_s = (time.perf_counter() - t0) / steps
        for seq in list(sched.active):
            sched._release(seq, "cancelled")
    return dt, replay_s


def fill_random_kv(llm: LLM) -> None:
    pool = llm.pool
    if pool.quantized:
        pool.k.random_(-127, 128)
        pool.v.random_(-127, 128)
        pool.k_scale.uniform_(0.001, 0.02)
        pool.v_scale.uniform_(0.001, 0.02)
    else:
        pool.k.normal_()
        pool.v.normal_()


def weight_bytes(model) -> int:
    seen, total = set(), 0
    for name, p in model.named_parameters():
        if p.data_ptr() in seen or name == "embed.weight":
            continue                      # the embedding is read one row per token
        seen.add(p.data_ptr())
        total += p.numel() * p.element_size()
    return total


def decode_row(llm: LLM, label: str, kv: str, batch: int, ctx: int, steps: int, wbytes: int, bw: float) -> dict:
    """One table row: synthetic_decode's step time, with the bytes a step must move (weights
    read once, every sequence's KV) over it and over the graph replayed alone, against bw."""
    dt, rep = synthetic_decode(llm, batch, ctx, steps)
    pool = llm.pool
    byts = wbytes + batch * ctx * llm.config.kv_bytes_per_token(pool.k.element_size(), 4 if pool.quantized else 0)
    return dict(engine=label, kv=kv, batch=batch, context=ctx, spec="none", tok_s=batch / dt, step_ms=dt * 1e3,
                bw_fraction=byts / dt / bw, graph_ms=rep * 1e3 if rep else None,
                graph_bw_fraction=byts / rep / bw if rep else None, cuda_graphs=llm.runner.graphs is not None)


def hf_generate_tok_s(model, ctx: int, new: int, device, static: bool = False) -> float:
    """transformers' generate, decode alone. static: its static KV cache, with which generate
    compiles the decode step itself on a GPU (torch.compile, CUDA graphs): the strongest peer
    the GPU machine has installed, and the gpt-fast recipe inside transformers."""
    ids = torch.randint(0, model.config.vocab_size, (1, ctx), device=device)
    kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    if static:
        kw["cache_implementation"] = "static"

    def run(n):
        sync(device)
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        sync(device)
        return time.perf_counter() - t
    run(4)
    if static:
        run(new)        # compilation and graph capture happen over the first calls
    return (new - 1) / (run(new) - run(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.benchmarks.decode")
    ap.add_argument("--config", choices=["8b", "tiny"], default="8b")
    ap.add_argument("--contexts", default="1024,32768")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--no-hf", action="store_true", help="no transformers rows")
    ap.add_argument("--no-hf-static", action="store_true", help="no transformers static-cache compiled row")
    ap.add_argument("--json", help="write the numbers to this file")
    ap.add_argument("--copy-gib", type=float, default=2.0)
    ap.add_argument("--int8-config", help="int8 decode-attention launch config 'bn,w,st,split[,e][,n][,cN]' for this "
                    "run (default: the pinned DEFAULT_CONFIGS[True])")
    args = ap.parse_args(argv) if argv is not None else ap.parse_args()
    if not torch.cuda.is_available() and args.config == "8b":
        raise SystemExit("engine.benchmarks.decode --config 8b needs a CUDA GPU (--config tiny runs anywhere)")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.int8_config:
        from engine.kernels import triton_decode
        from engine.benchmarks.kernels import parse_config
        triton_decode.DEFAULT_CONFIGS[True] = parse_config(args.int8_config)
    contexts = [int(x) for x in args.contexts.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    cfg_dict = LLAMA_8B if args.config == "8b" else TINY
    bw = copy_bandwidth(dev, args.copy_gib)
    hf = hf_model(cfg_dict, dev)
    cfg = ModelConfig.from_dict(cfg_dict, where=f"bench config {args.config}")
    max_len = max(contexts) + args.steps + 64
    model = build_model(cfg, dict(hf.state_dict()), torch.bfloat16, dev, max_len, "hf model")
    wbytes = weight_bytes(model)
    rows = []
    small_len = min(contexts) + args.steps + 64
    # The same batch-1 step with the elementwise ops left unfused, then (CUDA) with the compiled
    # ops but the checkpoint's row-major projection weights (engine.model.layout), for the record.
    cuda = dev.type == "cuda"
    variants = [("assay-unfused", False, cuda)] + ([("assay-row-major", None, False)] if cuda else [])
    for label, compile_ops, column_major in variants:
        if compile_ops is False:
            fused.disable_compile()
        set_projection_layout(model, column_major)
        llm = BenchLLM(cfg, model, kv_dtype="bf16", device=dev, kv_capacity_tokens=small_len + 16,
                       max_concurrency=1, max_model_len=small_len, compile_ops=compile_ops)
        fill_random_kv(llm)
        rows.append(decode_row(llm, label, "bf16", 1, min(contexts), args.steps, wbytes, bw))
        llm.stop()
        del llm
    set_projection_layout(model, cuda)
    for kv in ("bf16", "int8"):
        cap = max(batches) * (max_len + 16)
        llm = BenchLLM(cfg, model, kv_dtype=kv, device=dev, kv_capacity_tokens=cap, max_concurrency=max(batches),
                       max_model_len=max_len, prefill_chunk=1024)
        fill_random_kv(llm)
        for ctx in contexts:
            for b in batches:
                rows.append(decode_row(llm, "assay", kv, b, ctx, args.steps, wbytes, bw))
        if kv == "bf16":
            rows += spec_rows(llm, cfg, min(contexts), args.steps, dev)
        compiled = llm.compiled_ops
        llm.stop()
        del llm
        torch.cuda.empty_cache()
    if not args.no_hf:
        hf_bytes = wbytes + min(contexts) * cfg.kv_bytes_per_token(2, 0)   # bf16 KV, as decode_row counts
        tok_s = hf_generate_tok_s(hf, min(contexts), args.steps, dev)
        rows.append(dict(engine="transformers", kv="bf16", batch=1, context=min(contexts), spec="none",
                         tok_s=tok_s, step_ms=1e3 / tok_s, bw_fraction=tok_s * hf_bytes / bw, cuda_graphs=False))
        if cuda and not args.no_hf_static:
            tok_s = hf_generate_tok_s(hf, min(contexts), args.steps, dev, static=True)
            rows.append(dict(engine="transformers-static-compiled", kv="bf16", batch=1, context=min(contexts),
                             spec="none", tok_s=tok_s, step_ms=1e3 / tok_s, bw_fraction=tok_s * hf_bytes / bw,
                             cuda_graphs=True))
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu"
    from engine.kernels.triton_decode import DEFAULT_CONFIGS
    report = dict(gpu=gpu, torch=torch.__version__, python=platform.python_version(),
                  decode_configs={str(k): v.__dict__ for k, v in DEFAULT_CONFIGS.items()},
                  config=args.config, compiled_ops=compiled, copy_bandwidth_gb_s=bw / 1e9,
                  weight_bytes=wbytes, projection_layout="column-major" if dev.type == "cuda" else "row-major",
                  rows=rows)
    print_table(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=True)
    return 0


def spec_rows(llm: LLM, cfg, ctx: int, steps: int, dev) -> list[dict]:
    """Real prefill + decode of a repetitive prompt, plain vs n-gram speculation (K=7)."""
    g = torch.Generator().manual_seed(1)
    phrase = torch.randint(0, cfg.vocab_size, (32,), generator=g).tolist()
    prompt = (phrase * (ctx // 32 + 1))[:ctx]
    out = []
    for mode in ("none", "ngram"):
        llm.scheduler.spec = mode
        llm.generate(prompt, SamplingParams(max_new_tokens=8, ignore_eos=True))   # warm-up
        res = llm.generate(prompt, SamplingParams(max_new_tokens=steps, ignore_eos=True))
        sp = res.stats["spec"]
        out.append(dict(engine="assay", kv="bf16", batch=1, context=ctx, spec=mode,
                        tok_s=res.stats["decode_tok_s"], step_ms=None, bw_fraction=None,
                        accepted=sp["accepted"], attempted=sp["attempted"], cuda_graphs=llm.runner.graphs is not None))
    llm.scheduler.spec = "none"
    return out


def print_table(r: dict) -> None:
    print(f"GPU {r['gpu']}  torch {r['torch']}  config {r['config']}  "
          f"copy bandwidth {r['copy_bandwidth_gb_s']:.0f} GB/s  weights {r['weight_bytes'] / 1e9:.2f} GB  "
          f"fused ops {r['compiled_ops']}")
    print(f"{'engine':<30}{'kv':<6}{'batch':>6}{'context':>9}{'spec':>7}{'tok/s':>10}{'ms/step':>9}{'bw frac':>9}"
          f"{'graph ms':>10}{'g frac':>8}")
    for x in r["rows"]:
        frac = f"{x['bw_fraction']:.2f}" if x["bw_fraction"] is not None else "-"
        ms = f"{x['step_ms']:.2f}" if x["step_ms"] is not None else "-"
        extra = ""
        if x.get("graph_ms"):
            extra = f"{x['graph_ms']:>10.2f}{x['graph_bw_fraction']:>8.2f}"
        if "accepted" in x and x["spec"] != "none":
            extra = f"  accepted {x['accepted']} / attempted {x['attempted']}"
        print(f"{x['engine']:<30}{x['kv']:<6}{x['batch']:>6}{x['context']:>9}{x['spec']:>7}"
              f"{x['tok_s']:>10.1f}{ms:>9}{frac:>9}{extra}")
    ours = [x for x in r["rows"] if x["engine"] == "assay" and x["kv"] == "bf16" and x["batch"] == 1
            and x["spec"] == "none"]
    for peer in (x for x in r["rows"] if x["engine"].startswith("transformers")):
        mine = next((x for x in ours if x["context"] == peer["context"]), None)
        if mine:
            print(f"assay / {peer['engine']} (batch 1, context {peer['context']}): {mine['tok_s'] / peer['tok_s']:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
