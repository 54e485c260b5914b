"""Resolving device, compute dtype and KV dtype from user strings."""
from __future__ import annotations

import torch

_NAMES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def resolve_device(device: str | torch.device) -> torch.device:
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available here")
    return dev


def resolve_dtype(dtype: str | torch.dtype, checkpoint_dtype: str) -> torch.dtype:
    """'auto' = the checkpoint's own dtype (float32 when it names none we know)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return _NAMES.get(checkpoint_dtype, torch.float32)
    if dtype not in _NAMES:
        raise ValueError(f"dtype must be auto, float32 or bfloat16 (or float16), got {dtype!r}")
    return _NAMES[dtype]


def resolve_kv_dtype(kv_dtype: str | torch.dtype, compute: torch.dtype) -> torch.dtype:
    """'auto' = the compute dtype; 'int8' = quantised with per-token, per-head scales."""
    if isinstance(kv_dtype, torch.dtype):
        return kv_dtype
    if kv_dtype == "auto":
        return compute
    if kv_dtype == "int8":
        return torch.int8
    if kv_dtype not in _NAMES:
        raise ValueError(f"kv_dtype must be auto, int8, bf16 or float32, got {kv_dtype!r}")
    return _NAMES[kv_dtype]
