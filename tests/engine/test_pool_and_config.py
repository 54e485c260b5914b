"""KV pool sizing, block allocation, and config errors."""
from __future__ import annotations

import json

import pytest
import torch

from engine.errors import AdmissionError, ModelLoadError
from engine.model.config import ModelConfig
from engine.runtime.block_manager import BlockManager
from engine.runtime.kv_pool import KVPool, block_bytes, blocks_for


def _cfg(**kw) -> ModelConfig:
    d = dict(model_type="llama", vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=64)
    d.update(kw)
    return ModelConfig.from_dict(d)


def test_block_bytes_and_budget():
    cfg = _cfg()                                   # head_dim 8, 2 kv heads, 2 layers
    assert block_bytes(cfg, 16, torch.float32) == 2 * 2 * 2 * 8 * 4 * 16
    assert block_bytes(cfg, 16, torch.int8) == 2 * 2 * 2 * (8 + 4) * 16
    per = block_bytes(cfg, 16, torch.bfloat16)
    assert blocks_for(cfg, 16, torch.bfloat16, per * 11, None) == 10      # one block is scratch
    assert blocks_for(cfg, 16, torch.bfloat16, None, 33) == 3
    with pytest.raises(ValueError, match="exactly one"):
        blocks_for(cfg, 16, torch.bfloat16, 100, 100)


def test_block_manager_allocates_frees_and_evicts_lru():
    bm = BlockManager(4, 16)
    with pytest.raises(AdmissionError):
        bm.check_fits(65)
    a = bm.allocate(2)
    bm.put_session("s1", list(range(20)), a)
    b = bm.allocate(1)
    bm.put_session("s2", list(range(5)), b)
    assert bm.free_blocks == 1 and bm.session_blocks() == 3
    got = bm.allocate(3)                           # evicts s1 (least recently used) only
    assert len(got) == 3 and bm.sessions() == ["s2"]
    assert bm.allocate(2) is None                  # s2's one block is not enough ...
    assert bm.sessions() == ["s2"]                 # ... so it is not evicted for nothing
    bm.free(got)
    assert bm.free_blocks == 3 and bm.drop_session("s2") and bm.free_blocks == 4


def test_pool_export_import_shapes():
    cfg = _cfg()
    pool = KVPool(cfg, 4, 4, torch.int8, "cpu")
    assert pool.k.shape == (2, 5, 4, 2, 8) and pool.k_scale.shape == (2, 5, 4, 2)
    pool.k.random_(-100, 100)
    pool.k_scale.uniform_(0.1, 1.0)
    state = pool.read_tokens([2, 0], 6)
    assert torch.equal(state["k"][:, :4], pool.k[:, 2]) and torch.equal(state["k"][:, 4:], pool.k[:, 0, :2])
    other = KVPool(cfg, 4, 4, torch.int8, "cpu")
    other.write_tokens([1, 3], state)
    assert torch.equal(other.read_tokens([1, 3], 6)["k_scale"], state["k_scale"])


def test_config_errors_name_the_problem(tmp_path):
    with pytest.raises(ModelLoadError, match="model_type 'gpt2'"):
        ModelConfig.from_dict({"model_type": "gpt2"})
    with pytest.raises(ModelLoadError, match="'intermediate_size' is missing"):
        ModelConfig.from_dict({"model_type": "llama", "vocab_size": 8, "hidden_size": 8,
                               "num_hidden_layers": 1, "num_attention_heads": 2})
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        ModelConfig.from_dir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 8, "hidden_size": 8,
                                                      "num_hidden_layers": 1, "num_attention_heads": 2,
                                                      "intermediate_size": 8,
                                                      "rope_scaling": {"rope_type": "yarn", "factor": 2}}))
    with pytest.raises(ModelLoadError, match="yarn"):
        ModelConfig.from_dir(tmp_path)


def test_llama3_rope_scaling_read_from_both_styles():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    a = _cfg(rope_theta=500000.0, rope_scaling=scaling)
    b = _cfg(rope_parameters=dict(scaling, rope_theta=500000.0))
    assert a.rope_theta == b.rope_theta == 500000.0 and a.rope_scaling == b.rope_scaling
