"""The engine's one paged KV pool: per-layer K/V caches in fixed-size blocks.

Layout per layer: [num_blocks + 1, block_size, num_kv_heads, head_dim] in the compute dtype or
int8 (then float32 scales [num_blocks + 1, block_size, num_kv_heads]); an int8 V cache is a view
of page-transposed storage (engine.kernels.cache_layout). The extra last block is
scratch: padded rows of a CUDA-graph batch write there, never into a sequence's block.
"""
from __future__ import annotations

import torch

from engine.errors import EngineError
from engine.kernels import cache_layout
from engine.model.config import ModelConfig


def block_bytes(cfg: ModelConfig, block_size: int, kv_dtype: torch.dtype) -> int:
    elem = torch.empty((), dtype=kv_dtype).element_size()
    scale = 4 if kv_dtype == torch.int8 else 0
    return cfg.kv_bytes_per_token(elem, scale) * block_size


def blocks_for(cfg: ModelConfig, block_size: int, kv_dtype: torch.dtype,
               budget_bytes: int | None, capacity_tokens: int | None) -> int:
    """Number of blocks from an explicit byte budget or token count (exactly one of them)."""
    if (budget_bytes is None) == (capacity_tokens is None):
        raise ValueError("give exactly one of kv_budget_bytes or kv_capacity_tokens")
    if capacity_tokens is not None:
        if capacity_tokens < block_size:
            raise ValueError(f"kv_capacity_tokens={capacity_tokens} is below one block ({block_size} tokens)")
        return -(-int(capacity_tokens) // block_size)
    n = int(budget_bytes) // block_bytes(cfg, block_size, kv_dtype) - 1   # minus the scratch block
    if n < 1:
        raise ValueError(f"kv_budget_bytes={budget_bytes} holds no block of "
                         f"{block_bytes(cfg, block_size, kv_dtype)} bytes")
    return n


class KVPool:
    def __init__(self, cfg: ModelConfig, num_blocks: int, block_size: int, kv_dtype: torch.dtype, device):
        self.cfg, self.num_blocks, self.block_size, self.dtype = cfg, num_blocks, block_size, kv_dtype
        self.device = torch.device(device)
        shape = (cfg.num_layers, num_blocks + 1, block_size, cfg.num_kv_heads, cfg.head_dim)
        self.k = cache_layout.empty_cache(shape, kv_dtype, self.device, v=False)
        self.v = cache_layout.empty_cache(shape, kv_dtype, self.device, v=True)   # int8: page-transposed
        self.quantized = kv_dtype == torch.int8
        if self.quantized:
            self.k_scale = torch.zeros(shape[:-1], dtype=torch.float32, device=self.device)
            self.v_scale = torch.zeros(shape[:-1], dtype=torch.float32, device=self.device)
        else:
            self.k_scale = self.v_scale = None

    @property
    def scratch_block(self) -> int:
        return self.num_blocks

    def layer_caches(self) -> list[tuple]:
        def s(t, i):
            return None if t is None else t[i]
        return [(self.k[i], self.v[i], s(self.k_scale, i), s(self.v_scale, i)) for i in range(self.cfg.num_layers)]

    def _block_offsets(self, blocks: list[int], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(block id, offset in block) of the first n tokens held by a block list."""
        b = torch.tensor(blocks, dtype=torch.int64, device=self.device)
        pos = torch.arange(n, device=self.device)
        return b[pos // self.block_size], pos % self.block_size

    def read_tokens(self, blocks: list[int], n: int) -> dict[str, torch.Tensor]:
        """The first n tokens' KV of a block list, on the CPU: k/v [L, n, Hkv, D] (+ scales)."""
        blk, off = self._block_offsets(blocks, n)
        names = ["k", "v"] + (["k_scale", "v_scale"] if self.quantized else [])
        # Indexed by (block, offset) rather than through a flat view: an int8 V cache is a
        # strided view of page-transposed storage (engine.kernels.cache_layout).
        return {name: getattr(self, name)[:, blk, off].cpu() for name in names}

    def write_tokens(self, blocks: list[int], tensors: dict[str, torch.Tensor]) -> None:
        n = tensors["k"].shape[1]
        names = ["k", "v"] + (["k_scale", "v_scale"] if self.quantized else [])
        for name in names:
            if name not in tensors:
                raise EngineError(f"session state lacks tensor {name!r} needed by a {self.dtype} KV pool")
            dst = getattr(self, name)
            want = (self.cfg.num_layers, n) + tuple(dst.shape[3:])
            t = tensors[name]
            if tuple(t.shape) != want or t.dtype != dst.dtype:
                raise EngineError(f"session tensor {name!r}: {tuple(t.shape)} {t.dtype}, "
                                  f"expected {want} {dst.dtype}")
        blk, off = self._block_offsets(blocks, n)
        for name in names:
            getattr(self, name)[:, blk, off] = tensors[name].to(self.device)
