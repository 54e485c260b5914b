"""Paged-KV attention kernels (Triton) with plain PyTorch references; see ops for the API."""

from engine.kernels.errors import KernelBackendUnavailable, KernelInputError
from engine.kernels.ops import (
    KernelOps,
    backend,
    kernel_build_id,
    paged_decode_attention,
    paged_prefill_attention,
    rope_write_kv,
    select,
    write_kv,
)
from engine.kernels.reference import quantize_int8

__all__ = [
    "KernelBackendUnavailable",
    "KernelInputError",
    "KernelOps",
    "backend",
    "kernel_build_id",
    "paged_decode_attention",
    "paged_prefill_attention",
    "quantize_int8",
    "rope_write_kv",
    "select",
    "write_kv",
]
