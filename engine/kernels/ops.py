"""The attention and KV-cache ops the engine calls, dispatched to Triton or to plain PyTorch.

Triton runs when it imports and the tensors are on CUDA (or TRITON_INTERPRET=1, the test
mode that interprets kernels on the CPU); otherwise the references in reference.py run.
ENGINE_KERNELS=torch|triton|auto forces a choice (a caller's own choice, such as
LLM(attention=...), comes first); backend() is the one place that decides. The Triton kernel modules are imported on
first use, so that TRITON_INTERPRET set before that point still takes effect.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import os
from pathlib import Path

import torch

from engine.kernels import reference
from engine.kernels.errors import KernelBackendUnavailable

ENV_BACKEND = "ENGINE_KERNELS"
BACKENDS = ("torch", "triton")
# Every file whose bytes decide what the ops compute; kernel_build_id hashes them in order.
KERNEL_SOURCES = ("cache_layout.py", "checks.py", "decode_plan.py", "errors.py", "ops.py", "reference.py",
                  "triton_decode.py", "triton_kv_write.py", "triton_persistent.py")


@functools.lru_cache(maxsize=1)
def triton_version() -> str | None:
    """The installed Triton's version, or None when it is absent or does not import."""
    try:
        importlib.import_module("triton")
        return importlib.metadata.version("triton")
    except Exception:  # noqa: BLE001 - any import failure means "no Triton here"
        return None


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def backend(device: torch.device | str | None = None, prefer: str | None = None) -> str:
    """'triton' or 'torch': what the ops use for tensors on ``device`` (default: cuda if present).

    The engine's one backend selector. ``prefer`` (auto|torch|triton) is a caller's choice,
    such as LLM(attention=...); None or "auto" defers to ENGINE_KERNELS, then to the device.
    """
    forced = (prefer or "auto").strip().lower()
    source = "attention" if forced != "auto" else ENV_BACKEND
    if forced == "auto":
        forced = os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto"
    if forced not in BACKENDS + ("auto",):
        raise KernelBackendUnavailable(f"{source}={forced!r}: expected torch, triton or auto")
    if forced == "torch":
        return "torch"
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    runnable = triton_version() is not None and (dev.type == "cuda" or _interpreting())
    if forced == "triton" and not runnable:
        why = "Triton does not import" if triton_version() is None else \
            f"tensors on {dev.type} need CUDA or TRITON_INTERPRET=1"
        raise KernelBackendUnavailable(f"{source}=triton but {why}")
    return "triton" if runnable else "torch"


class KernelOps:
    """The ops bound to one backend, chosen once (an engine's per-layer calls skip the choice).

    Same names and signatures as this module's functions; ``name`` is the backend."""

    def __init__(self, name: str):
        if name not in BACKENDS:
            raise KernelBackendUnavailable(f"unknown kernel backend {name!r}: expected torch or triton")
        self.name = name
        if name == "triton":
            from engine.kernels.triton_decode import paged_decode_attention_triton
            from engine.kernels.triton_kv_write import rope_write_kv_triton, write_kv_triton
            self.write_kv, self.rope_write_kv = write_kv_triton, rope_write_kv_triton
            self.paged_decode_attention = paged_decode_attention_triton
        else:
            self.write_kv, self.rope_write_kv = reference.write_kv_ref, reference.rope_write_kv_ref
            self.paged_decode_attention = reference.paged_decode_attention_ref
        self.paged_prefill_attention = reference.paged_prefill_attention_ref

    def kernel_build_id(self) -> str:
        return kernel_build_id()


def select(device: torch.device | str | None = None, prefer: str | None = None) -> KernelOps:
    """KernelOps for tensors on ``device``, on the backend that backend(device, prefer) names."""
    return KernelOps(backend(device, prefer))


def write_kv(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping) -> None:
    """Store k, v [num_tokens, num_kv_heads, head_dim] into the paged cache at slot_mapping."""
    if backend(k.device) == "triton":
        from engine.kernels.triton_kv_write import write_kv_triton
        return write_kv_triton(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping)
    return reference.write_kv_ref(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping)


def rope_write_kv(qkv, num_heads, num_kv_heads, cos, sin, k_cache, v_cache, k_scale, v_scale,
                  slot_mapping) -> torch.Tensor:
    """RoPE on qkv's q and k heads, k and v stored at slot_mapping, in one kernel: returns q.

    qkv [N, Hq + 2 Hkv, D] (head_dim contiguous), cos/sin [N, D]; q [N, Hq, D] in qkv's dtype.
    """
    if backend(qkv.device) == "triton":
        from engine.kernels.triton_kv_write import rope_write_kv_triton
        return rope_write_kv_triton(qkv, num_heads, num_kv_heads, cos, sin, k_cache, v_cache, k_scale,
                                    v_scale, slot_mapping)
    return reference.rope_write_kv_ref(qkv, num_heads, num_kv_heads, cos, sin, k_cache, v_cache, k_scale,
                                       v_scale, slot_mapping)


def paged_decode_attention(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens,
                           sm_scale: float) -> torch.Tensor:
    """One new token per sequence: q [batch, Hq, D] -> out [batch, Hq, D] in q.dtype."""
    if backend(q.device) == "triton":
        from engine.kernels.triton_decode import paged_decode_attention_triton
        return paged_decode_attention_triton(q, k_cache, v_cache, k_scale, v_scale, block_tables,
                                             seq_lens, sm_scale)
    return reference.paged_decode_attention_ref(q, k_cache, v_cache, k_scale, v_scale,
                                                block_tables, seq_lens, sm_scale)


def paged_prefill_attention(q, k_cache, v_cache, k_scale, v_scale, block_table, start_pos: int,
                            sm_scale: float) -> torch.Tensor:
    """Causal attention of a chunk q [chunk, Hq, D] at positions start_pos.. of one sequence.

    Every backend runs the PyTorch implementation (one block gather, then fused
    scaled_dot_product_attention), which is already compute-efficient for chunks.
    """
    return reference.paged_prefill_attention_ref(q, k_cache, v_cache, k_scale, v_scale,
                                                 block_table, start_pos, sm_scale)


@functools.lru_cache(maxsize=1)
def kernel_build_id() -> str:
    """sha256 hex over the kernel sources and the Triton version, for the engine's identity."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in KERNEL_SOURCES:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    h.update(b"triton=" + (triton_version() or "none").encode())
    return h.hexdigest()
