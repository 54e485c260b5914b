"""The GPU lane's speed model (gates/probes/random_model.py): made from a seed, byte-identical
for the same seed, loadable by the engine, and it never stops early on an end token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.runtime import PROBES
from tests.script_module import load_script

REFERENCE = Path(__file__).resolve().parents[2] / ".assay" / "models" / "smollm2-135m-instruct"


def _module():
    return load_script(PROBES / "random_model.py", "random_model_probe")


@pytest.fixture
def small(monkeypatch):
    mod = _module()
    # The 8B shape takes 15 GB; the same code path at a shape a CPU test affords.
    monkeypatch.setitem(mod.PRESETS, "llama-8b", dict(mod.LLAMA_8B, hidden_size=64, num_hidden_layers=2,
                                                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                                       intermediate_size=128))
    return mod


@pytest.mark.skipif(not (REFERENCE / "config.json").is_file(), reason="the reference model is fetched by `make model`")
def test_same_seed_same_bytes_and_full_length_decode(small, tmp_path):
    a = small.random_model({"out": str(tmp_path / "a"), "tokenizer_from": str(REFERENCE), "seed": 0})
    b = small.random_model({"out": str(tmp_path / "b"), "tokenizer_from": str(REFERENCE), "seed": 0})
    c = small.random_model({"out": str(tmp_path / "c"), "tokenizer_from": str(REFERENCE), "seed": 1})
    read = lambda name: (tmp_path / name / "model.safetensors").read_bytes()  # noqa: E731
    assert read("a") == read("b") and read("a") != read("c")
    assert a["parameters"] == b["parameters"] > 0 and a["reused"] is False
    assert small.random_model({"out": str(tmp_path / "a"), "tokenizer_from": str(REFERENCE), "seed": 0})["reused"] is True
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["vocab_size"] == json.loads((REFERENCE / "config.json").read_text())["vocab_size"]
    specials = [t["id"] for t in json.loads((REFERENCE / "tokenizer.json").read_text())["added_tokens"] if t["special"]]
    assert 2 in a["zeroed_head_rows"] and set(specials) <= set(a["zeroed_head_rows"])

    from engine.runtime.llm import LLM
    from engine.runtime.sampling import SamplingParams

    llm = LLM(str(tmp_path / "a"), device="cpu", dtype="float32")
    try:
        out = llm.generate([1, 200, 300, 400], SamplingParams(temperature=0.0, max_new_tokens=48), timeout=300)
    finally:
        llm.stop()
    assert out.finish_reason == "length" and len(out.token_ids) == 48
    assert not set(out.token_ids) & set(a["zeroed_head_rows"])
