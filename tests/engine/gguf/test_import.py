"""Importing the reference GGUF: the right config, byte-identical output, HF-layout weights."""
from __future__ import annotations

import json

import numpy as np
import torch

from engine.gguf_import import import_gguf, pins
from engine.gguf_import.importer import FILES
from engine.gguf_import.weights import unpermute


def test_two_imports_are_byte_identical_and_match_make_model(gguf_path, model_dir, tmp_path):
    a = import_gguf(gguf_path, tmp_path / "a")
    b = import_gguf(gguf_path, tmp_path / "b")
    assert set(a.files) == set(FILES)
    assert a.files == b.files
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (model_dir / name).read_bytes(), name
    assert a.source_sha256 == pins.GGUF_SHA256


def test_config_comes_from_the_gguf_metadata(model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["num_key_value_heads"], config["head_dim"]) == (30, 576, 9, 3, 64)
    assert (config["vocab_size"], config["max_position_embeddings"], config["intermediate_size"]) == (49152, 8192, 1536)
    assert config["rope_theta"] == 100000.0 and config["tie_word_embeddings"] is True
    assert config["eos_token_id"] == 2 and config["bos_token_id"] == 1
    tok_conf = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert tok_conf["eos_token"] == "<|im_end|>" and "<|im_start|>" in tok_conf["chat_template"]


def test_unpermute_inverts_llama_cpp_permute():
    # llama.cpp convert_hf_to_gguf.py LlamaModel.permute, copied so the test checks the inverse of the real thing.
    def permute(weights, n_head):
        return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
                .swapaxes(1, 2).reshape(weights.shape))
    rng = np.random.default_rng(0)
    for heads, head_dim in ((9, 64), (3, 64), (4, 8)):
        w = rng.standard_normal((heads * head_dim, 24)).astype(np.float32)
        assert np.array_equal(unpermute(permute(w, heads), heads), w)
        assert not np.array_equal(permute(w, heads), w)


def test_bfloat16_import_is_the_float32_weights_rounded(gguf_path, model_dir, tmp_path):
    from safetensors import safe_open
    import_gguf(gguf_path, tmp_path / "bf16", dtype="bfloat16")
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    name = "model.layers.3.self_attn.k_proj.weight"
    with safe_open(model_dir / "model.safetensors", "pt") as f32, \
            safe_open(tmp_path / "bf16" / "model.safetensors", "pt") as bf16:
        assert torch.equal(bf16.get_tensor(name), f32.get_tensor(name).to(torch.bfloat16))


def test_transformers_on_our_directory_equals_transformers_on_the_gguf(model_dir, hf_gguf):
    """Our dequantize + un-permute gives the very weights transformers' GGUF loader builds."""
    from transformers import AutoModelForCausalLM
    ref, tok = hf_gguf
    ours = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    ids = torch.tensor([tok.encode("The quick brown fox jumps over the lazy dog. It was a sunny day in")])
    with torch.no_grad():
        diff = (ours(ids).logits - ref(ids).logits).abs().max().item()
    assert diff <= 1e-5, diff
    sd_ours, sd_ref = ours.state_dict(), ref.state_dict()
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.29.self_attn.k_proj.weight",
                 "model.embed_tokens.weight"):
        assert torch.equal(sd_ours[name], sd_ref[name]), name


def test_import_gguf_subcommand(gguf_path, model_dir, tmp_path):
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "engine", "import-gguf", str(gguf_path), str(tmp_path / "m"),
                          "--dtype", "float32"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    printed = dict(reversed(line.split("  ")) for line in run.stdout.splitlines())
    assert set(printed) == set(FILES)
    from engine.digests import file_sha256 as _sha256_file
    assert all(printed[name] == _sha256_file(model_dir / name) for name in FILES)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    run = subprocess.run([sys.executable, "-m", "engine", "import-gguf", str(bad), str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "tensor count" in run.stderr and str(bad) in run.stderr
