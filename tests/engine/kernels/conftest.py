"""Kernel tests run the Triton kernels compiled on CUDA, or interpreted on the CPU.

Without CUDA, TRITON_INTERPRET=1 must be set before the kernel modules are decorated by
triton.jit, so they are imported here with it set. It is then taken out of the process
environment again and set only around this directory's tests: elsewhere in the same pytest
run the engine's CPU tests must keep dispatching to the fast torch references.
"""

from __future__ import annotations

import os
import secrets

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()

if not HAS_CUDA:
    _before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    import importlib
    import sys

    for _name in ("engine.kernels.triton_decode", "engine.kernels.triton_kv_write"):
        # Reload if something imported it earlier: its kernels were then built for a GPU.
        _mod = sys.modules.get(_name)
        importlib.reload(_mod) if _mod is not None else importlib.import_module(_name)
    if _before is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = _before

DEVICES = [pytest.param("cuda", marks=pytest.mark.gpu)] if HAS_CUDA else ["cpu"]


@pytest.fixture(autouse=True)
def _kernel_env(monkeypatch):
    monkeypatch.delenv("ENGINE_KERNELS", raising=False)
    if not HAS_CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture
def gen(device) -> torch.Generator:
    """A freshly seeded generator per test; the seed is printed so a failure can be replayed."""
    seed = secrets.randbits(31)
    print(f"seed={seed}")
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g
