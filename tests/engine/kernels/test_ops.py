"""Dispatch: which backend runs, ENGINE_KERNELS forcing, and the kernel build id."""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path

import pytest
import torch

import engine.kernels.ops as ops
from engine.kernels.cache_layout import empty_cache
from engine.kernels.errors import KernelBackendUnavailable
from engine.kernels.reference import paged_decode_attention_ref
from engine.kernels.triton_decode import paged_decode_attention_triton
from tests.engine.kernels.paged_inputs import build, randn


def test_backend_follows_device_and_interpret_mode(device, monkeypatch):
    assert ops.backend(device) == "triton"          # CUDA, or CPU under TRITON_INTERPRET=1
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert ops.backend("cpu") == "torch"
    monkeypatch.setenv("ENGINE_KERNELS", "triton")
    with pytest.raises(KernelBackendUnavailable, match="TRITON_INTERPRET"):
        ops.backend("cpu")
    monkeypatch.setenv("ENGINE_KERNELS", "torch")
    assert ops.backend(device) == "torch"
    monkeypatch.setenv("ENGINE_KERNELS", "fast")
    with pytest.raises(KernelBackendUnavailable, match="'fast'"):
        ops.backend(device)


def test_a_callers_choice_comes_before_the_environment(device, gen, monkeypatch):
    monkeypatch.setenv("ENGINE_KERNELS", "triton")
    assert ops.backend(device, prefer="torch") == "torch"
    assert ops.backend(device, prefer="auto") == "triton"      # auto defers to ENGINE_KERNELS
    monkeypatch.setenv("ENGINE_KERNELS", "torch")
    assert ops.backend(device, prefer="triton") == "triton"
    with pytest.raises(KernelBackendUnavailable, match="attention='fast'"):
        ops.backend(device, prefer="fast")
    # select() binds the ops once: the environment changing later does not move them.
    bound = ops.select(device, prefer="triton")
    assert bound.name == "triton"
    p = build(gen, [300, 7], num_kv_heads=2, head_dim=32, cache_dtype=torch.int8, device=device)
    q = randn(gen, 2, 8, 32, device=device)
    args = (q, *p.cache_args(), p.block_tables, p.seq_lens, 0.2)
    assert torch.equal(bound.paged_decode_attention(*args), paged_decode_attention_triton(*args))
    ref = ops.select(device, prefer="torch")
    assert ref.name == "torch"
    assert torch.equal(ref.paged_decode_attention(*args), paged_decode_attention_ref(*args))


def test_ops_route_to_the_chosen_backend(device, gen, monkeypatch):
    p = build(gen, [300, 7], num_kv_heads=2, head_dim=32, cache_dtype=torch.int8, device=device)
    q = randn(gen, 2, 8, 32, device=device)
    args = (q, *p.cache_args(), p.block_tables, p.seq_lens, 0.2)
    tri = paged_decode_attention_triton(*args)
    ref = paged_decode_attention_ref(*args)
    assert not torch.equal(tri, ref)                  # different arithmetic, so routing is visible
    assert torch.equal(ops.paged_decode_attention(*args), tri)
    monkeypatch.setenv("ENGINE_KERNELS", "torch")
    assert torch.equal(ops.paged_decode_attention(*args), ref)


def test_write_kv_op_on_either_backend(device, gen, monkeypatch):
    k, v = randn(gen, 5, 2, 32, device=device), randn(gen, 5, 2, 32, device=device)
    slots = torch.tensor([3, -1, 40, 0, 17], device=device)
    caches = []
    for forced in ("triton", "torch"):
        monkeypatch.setenv("ENGINE_KERNELS", forced)
        c = [empty_cache((4, 16, 2, 32), torch.int8, device, v=v) for v in (False, True)]
        s = [torch.zeros(4, 16, 2, device=device) for _ in range(2)]
        ops.write_kv(k, v, c[0], c[1], s[0], s[1], slots)
        caches.append(c + s)
    assert all(torch.equal(a, b) for a, b in zip(*caches))
    assert int(caches[0][0].view(64, -1)[40].abs().max()) == 127


def test_prefill_op_is_the_reference(device, gen):
    p = build(gen, [50], num_kv_heads=2, head_dim=32, device=device)
    q = randn(gen, 10, 4, 32, device=device)
    got = ops.paged_prefill_attention(q, *p.cache_args(), p.block_tables[0], 40, 0.2)
    assert got.shape == q.shape and torch.isfinite(got).all()


# Not in the build id: these choose where a kernel's binary comes from (a shipped cubin or a JIT
# compile), not what it computes; Triton's own cache key (source, options, target) binds a shipped
# cubin to the kernel source it was compiled from.
AOT_MODULES = {"aot.py", "aot_build.py", "aot_cache.py", "aot_registry.py"}


def test_kernel_build_id_covers_sources_and_triton():
    here = Path(ops.__file__).parent
    h = hashlib.sha256()
    for name in ops.KERNEL_SOURCES:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    h.update(b"triton=" + importlib.metadata.version("triton").encode())
    assert ops.kernel_build_id() == h.hexdigest()
    listed = {p.name for p in here.glob("*.py")} - {"__init__.py"}
    assert not set(ops.KERNEL_SOURCES) & AOT_MODULES
    assert listed == set(ops.KERNEL_SOURCES) | AOT_MODULES, \
        "a module of engine/kernels is in neither KERNEL_SOURCES nor AOT_MODULES"
