"""Paged KV write and attention: engine.kernels.ops when present, else a torch gather path.

The torch path keeps to the kernels' signatures and cache layout exactly; it lets the engine
run where the kernels package is absent, and is captured in CUDA graphs with static shapes.
"""
from __future__ import annotations

import torch

INT8_MAX = 127.0


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per (token, head): x [N, H, D] -> (int8 [N, H, D], scale float32 [N, H])."""
    # Same float32 steps as the kernels (round half away from zero), so both give equal bytes.
    xf = x.float()
    scale = xf.abs().amax(dim=-1) / INT8_MAX
    y = xf / torch.where(scale > 0, scale, torch.ones_like(scale))[..., None]
    q = torch.sign(y) * torch.floor(y.abs() + 0.5)
    return q.clamp_(-INT8_MAX, INT8_MAX).to(torch.int8), scale


def write_kv(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping):
    """Store k, v [N, Hkv, D] at flat slots (block * block_size + offset)."""
    nb, bs, h, d = k_cache.shape
    kf, vf = k_cache.view(nb * bs, h, d), v_cache.view(nb * bs, h, d)
    if k_cache.dtype == torch.int8:
        kq, ks = _quantize(k)
        vq, vs = _quantize(v)
        kf.index_copy_(0, slot_mapping, kq)
        vf.index_copy_(0, slot_mapping, vq)
        k_scale.view(nb * bs, h).index_copy_(0, slot_mapping, ks)
        v_scale.view(nb * bs, h).index_copy_(0, slot_mapping, vs)
    else:
        kf.index_copy_(0, slot_mapping, k.to(k_cache.dtype))
        vf.index_copy_(0, slot_mapping, v.to(v_cache.dtype))


def _gather(cache, scale, table, dtype):
    """Blocks named in table [..., M] -> [..., M * block_size, Hkv, D] in dtype (dequantised)."""
    nb, bs, h, d = cache.shape
    idx = table.clamp_min(0).long()
    x = cache[idx]                                   # [..., M, bs, h, d]
    if scale is not None:
        x = x.to(torch.float32) * scale[idx][..., None]
    x = x.to(dtype)
    return x.reshape(*idx.shape[:-1], idx.shape[-1] * bs, h, d)


def _attend(q, k, v, mask, sm_scale):
    """q [B, Q, H, D], k/v [B, S, Hkv, D], mask [B, Q, S] (True = visible) -> [B, Q, H, D]."""
    b, nq, h, d = q.shape
    g = h // k.shape[2]
    k = k.repeat_interleave(g, dim=2) if g > 1 else k
    v = v.repeat_interleave(g, dim=2) if g > 1 else v
    scores = torch.einsum("bqhd,bshd->bhqs", q.float(), k.float()) * sm_scale
    scores = scores.masked_fill(~mask[:, None], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqs,bshd->bqhd", p, v.float()).to(q.dtype)


def paged_decode_attention(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens, sm_scale):
    """q [B, H, D]; each row attends to its first seq_lens[b] cached tokens."""
    k = _gather(k_cache, k_scale, block_tables, q.dtype)
    v = _gather(v_cache, v_scale, block_tables, q.dtype)
    pos = torch.arange(k.shape[1], device=q.device)
    mask = (pos[None, :] < seq_lens[:, None].long())[:, None, :]
    return _attend(q[:, None], k, v, mask, sm_scale)[:, 0]


def paged_prefill_attention(q, k_cache, v_cache, k_scale, v_scale, block_table, start_pos, sm_scale):
    """q [T, H, D] for positions start_pos.. of one sequence; causal over its cached tokens."""
    t = q.shape[0]
    bs = k_cache.shape[1]
    n_blocks = (int(start_pos) + t + bs - 1) // bs
    table = block_table[:n_blocks][None]
    k = _gather(k_cache, k_scale, table, q.dtype)
    v = _gather(v_cache, v_scale, table, q.dtype)
    kpos = torch.arange(k.shape[1], device=q.device)
    qpos = torch.arange(t, device=q.device) + int(start_pos)
    mask = (kpos[None, :] <= qpos[:, None])[None]
    return _attend(q[None], k, v, mask, sm_scale)[0]


class TorchOps:
    """The torch implementation under the kernels' names."""
    write_kv = staticmethod(write_kv)
    paged_decode_attention = staticmethod(paged_decode_attention)
    paged_prefill_attention = staticmethod(paged_prefill_attention)

    @staticmethod
    def kernel_build_id() -> str:
        return "torch-reference"


def select_ops(prefer: str = "auto"):
    """engine.kernels.ops (Triton on CUDA, its references elsewhere) when importable, else TorchOps.

    prefer="torch" forces this module's path; prefer="kernels" demands the kernels' module.
    """
    if prefer not in ("auto", "torch", "kernels"):
        raise ValueError(f"attention backend must be auto, torch or kernels, got {prefer!r}")
    if prefer == "torch":
        return TorchOps
    try:
        from engine.kernels import ops
    except ImportError:
        if prefer == "kernels":
            raise
        return TorchOps
    return ops
