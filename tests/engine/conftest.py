"""Fixtures for the engine core tests: tiny models made by engine.model.tiny, on the CPU by default.

ENGINE_TEST_DEVICE=cuda runs the same tests on a GPU."""
from __future__ import annotations

import os

import pytest
import torch

from engine.model.tiny import make_tiny_model

DEVICE = os.environ.get("ENGINE_TEST_DEVICE", "cpu")


@pytest.fixture(scope="session")
def device() -> str:
    return DEVICE


@pytest.fixture(scope="session")
def qwen3_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("qwen3"), "qwen3", seed=0)


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("llama"), "llama", seed=0)


@pytest.fixture(scope="session", params=["qwen3", "llama"])
def tiny_dir(request, qwen3_dir, llama_dir):
    return qwen3_dir if request.param == "qwen3" else llama_dir


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)   # the test machine's cores are shared
    yield
