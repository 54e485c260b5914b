"""make-tiny-model determinism, the tokenizer, and the `python -m engine` commands."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from engine.model.tiny import make_tiny_model
from engine.model.tokenizer import Tokenizer


def _digests(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_same_seed_same_bytes(tmp_path):
    a = _digests(make_tiny_model(tmp_path / "a", "llama", seed=7))
    b = _digests(make_tiny_model(tmp_path / "b", "llama", seed=7))
    c = _digests(make_tiny_model(tmp_path / "c", "llama", seed=8))
    assert a == b
    assert a["model.safetensors"] != c["model.safetensors"]
    assert set(a) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    assert sum(p.stat().st_size for p in (tmp_path / "a").iterdir()) < 5_000_000


def test_tokenizer_round_trips(qwen3_dir):
    tok = Tokenizer(qwen3_dir)
    for text in ["Hello the world", "ünïcödé, tabs\tand\nnewlines", "<|im_start|>user\nhi<|im_end|>"]:
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("the the the")) < len("the the the")    # merges apply
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.token_to_id("<|im_end|>") in tok.eos_token_ids


def _run(*args, timeout=120):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_cli_make_and_generate_json(tmp_path, device):
    out = tmp_path / "m"
    r = _run("make-tiny-model", str(out), "--arch", "llama", "--seed", "1")
    assert r.returncode == 0, r.stderr
    r = _run("generate", "--model", str(out), "--prompt-ids", "5,6,7,5,6,7,5,6", "--max-new-tokens", "8",
             "--ignore-eos", "--spec", "ngram", "--draft-tokens", "3", "--json", "--device", device)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert len(data["token_ids"]) == 8 and data["stats"]["generated_tokens"] == 8
    assert data["stats"]["prompt_tokens"] == 8
    assert len(data["stats"]["spec"]["attempted"]) == 3
    r2 = _run("generate", "--model", str(out), "--prompt-ids", "5,6,7,5,6,7,5,6", "--max-new-tokens", "8",
              "--ignore-eos", "--json", "--device", device)
    assert json.loads(r2.stdout)["token_ids"] == data["token_ids"]
    r3 = _run("generate", "--model", str(out), "--prompt", "the cat", "--max-new-tokens", "4", "--device", device)
    assert r3.returncode == 0 and r3.stdout.endswith("\n")


def test_cli_errors_are_clear(tmp_path):
    r = _run("generate", "--model", str(tmp_path), "--prompt", "x", "--max-new-tokens", "2")
    assert r.returncode == 2 and "config.json" in r.stderr


def test_attention_backend_is_chosen_once_and_named(qwen3_dir):
    from engine.runtime.llm import LLM
    llm = LLM(qwen3_dir, device="cpu", kv_capacity_tokens=64, attention="torch")
    try:
        assert llm.status()["attention"] == "torch"
        assert llm.ops.name == "torch"
    finally:
        llm.stop()
    with pytest.raises(ValueError, match="attention must be one of .*'kernels'"):
        LLM(qwen3_dir, device="cpu", kv_capacity_tokens=64, attention="kernels")
