"""Fixtures for the reference model: the imported SmolLM2 directory, its GGUF, and transformers on it.

The model is fetched by `make model` (scripts/fetch_model.py) before `make test`; a missing model
is a failure, never a skip, so CI cannot pass without having run these tests.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.gguf_import import pins

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / pins.MODELS_ROOT
MODEL_DIR = MODELS / pins.MODEL_DIR
GGUF = MODELS / pins.GGUF_FILE


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"reference model file {path.relative_to(REPO)} is missing: run `make model` "
                    f"(.venv/bin/python scripts/fetch_model.py) first", pytrace=False)
    return path


@pytest.fixture(scope="session")
def model_dir() -> Path:
    _require(MODEL_DIR / "config.json")
    return _require(MODEL_DIR / "model.safetensors").parent


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    return _require(GGUF)


@pytest.fixture(scope="session")
def hf_gguf(gguf_path):
    """transformers' own GGUF loader on the same file, float32: the independent reference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    return model, tok


@pytest.fixture(scope="session")
def our_tokenizer(model_dir):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="session")
def llm(model_dir):
    """The engine on the imported model, float32 on the CPU (what the parity bound is stated for)."""
    from engine.runtime.llm import LLM
    # Long pending timeout: on two shared cores a queued request may wait minutes, which is not a fault.
    engine = LLM(str(model_dir), dtype="float32", device="cpu", kv_capacity_tokens=8192,
                 max_model_len=2048, max_concurrency=8, pending_timeout_s=900.0)
    yield engine
    engine.stop()
