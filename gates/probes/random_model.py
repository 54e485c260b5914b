"""A Llama-3-8B-shaped model with deterministic random bf16 weights, made on the lane host's GPU.

The speed, fit and benchmark phases of a GPU lane need a model the size users serve; shipping
15 GB of weights to every lane host would cost more than making them there. The tensors are drawn
on the device from a seeded generator, tensor by tensor in a fixed order, and written as one
safetensors file; the tokenizer is the lane's reference model's (its vocabulary sizes the
embedding). The end-of-sequence rows of the output head are zero: with random weights greedy
decoding would otherwise stop whenever an end token happens to win, and the benchmark needs its
full completion length. A finished directory is recognised by its record and reused.

This is a lane fixture, not engine code: it writes the files any engine that reads the
transformers layout can load. Its weight layout follows engine/model/tiny.py's, written again here
on purpose: gates reach an engine only through its HTTP API and CLI, so a lane cannot import the
candidate's own model code to make the model it judges that candidate with."""

import json
import os
import shutil
import time

RECORD = "random_model.json"
# The Llama-3-8B shape; the vocabulary is the tokenizer's (see above).
LLAMA_8B = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                head_dim=128, intermediate_size=14336, rms_norm_eps=1e-5, rope_theta=500000.0,
                max_position_embeddings=8192, tie_word_embeddings=False)
PRESETS = {"llama-8b": LLAMA_8B}


def _config(preset, ref_config):
    cfg = dict(PRESETS[preset], model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu",
               attention_bias=False, mlp_bias=False, vocab_size=ref_config["vocab_size"],
               bos_token_id=ref_config.get("bos_token_id"), eos_token_id=ref_config.get("eos_token_id"),
               pad_token_id=ref_config.get("pad_token_id"), torch_dtype="bfloat16")
    return cfg


def _stop_ids(cfg, ref):
    """Every id decoding could stop at: the config's end and pad ids and the tokenizer's special
    tokens (an engine may stop at any end-of-text token its tokenizer names)."""
    ids = cfg.get("eos_token_id")
    ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if cfg.get("pad_token_id") is not None:
        ids.add(cfg["pad_token_id"])
    try:
        with open(os.path.join(ref, "tokenizer.json"), encoding="utf-8") as f:
            ids.update(t["id"] for t in json.load(f).get("added_tokens", []) if t.get("special"))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return sorted(ids)


def random_model(a):
    import torch
    from safetensors.torch import save_file

    out, ref, seed, preset = a["out"], a["tokenizer_from"], int(a.get("seed", 0)), a.get("preset", "llama-8b")
    record_path = os.path.join(out, RECORD)
    if os.path.exists(record_path):
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
        if record.get("seed") == seed and record.get("preset") == preset:
            return {**record, "reused": True}
    t0 = time.monotonic()
    with open(os.path.join(ref, "config.json"), encoding="utf-8") as f:
        ref_config = json.load(f)
    cfg = _config(preset, ref_config)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=device).manual_seed(seed)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, kvh, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]

    def rnd(*shape, std):
        return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * std).to(torch.bfloat16).cpu()

    def norm(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(torch.bfloat16).cpu()

    w = {"model.embed_tokens.weight": rnd(v, h, std=1.0), "model.norm.weight": norm(h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = rnd(nh * d, h, std=h ** -0.5)
        w[p + "self_attn.k_proj.weight"] = rnd(kvh * d, h, std=h ** -0.5)
        w[p + "self_attn.v_proj.weight"] = rnd(kvh * d, h, std=h ** -0.5)
        w[p + "self_attn.o_proj.weight"] = rnd(h, nh * d, std=(nh * d) ** -0.5)
        w[p + "mlp.gate_proj.weight"] = rnd(inter, h, std=h ** -0.5)
        w[p + "mlp.up_proj.weight"] = rnd(inter, h, std=h ** -0.5)
        w[p + "mlp.down_proj.weight"] = rnd(h, inter, std=inter ** -0.5)
    head = rnd(v, h, std=0.5)
    stops = _stop_ids(cfg, ref)
    for token in stops:
        if 0 <= token < v:
            head[token].zero_()
    w["lm_head.weight"] = head
    os.makedirs(out, exist_ok=True)
    partial = os.path.join(out, "model.safetensors.partial")
    save_file({k: w[k].contiguous() for k in sorted(w)}, partial, metadata={"format": "pt"})
    os.replace(partial, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, sort_keys=True, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(ref, name)):
            shutil.copyfile(os.path.join(ref, name), os.path.join(out, name))
    params = sum(t.numel() for t in w.values())
    record = {"preset": preset, "seed": seed, "device": device, "parameters": params,
              "weights_bytes": sum(t.numel() * t.element_size() for t in w.values()),
              "zeroed_head_rows": stops, "made_s": round(time.monotonic() - t0, 1)}
    with open(record_path, "w", encoding="utf-8") as f:
        json.dump(record, f, sort_keys=True)
    return {**record, "reused": False}


def copy_bandwidth(a):
    """Device-to-device copy bandwidth (bytes read plus written per second), median of timed runs
    with CUDA events after a warm-up: the ceiling a decode step's weight reads are measured against."""
    import statistics

    import torch

    if not torch.cuda.is_available():
        return {"device": "cpu", "bytes_per_s": None}
    n = int(a.get("bytes", 1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(int(a.get("runs", 20))):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    median = statistics.median(times)
    del src, dst
    torch.cuda.empty_cache()
    return {"device": torch.cuda.get_device_name(0), "bytes": n, "runs": len(times), "median_s": median,
            "bytes_per_s": 2 * n / median}
