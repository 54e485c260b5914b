"""Plain PyTorch references for the paged-KV kernels; also the CPU and prefill implementation.

Cache layout (allocated by the KV pool):
  k_cache, v_cache  [num_blocks, block_size, num_kv_heads, head_dim], compute dtype or int8
  k_scale, v_scale  [num_blocks, block_size, num_kv_heads] float32 when int8, else None
  block_tables      [batch, max_blocks_per_seq] int32, -1 padding
  seq_lens          [batch] int32, tokens in cache including the current one
  slot_mapping      [num_tokens] int64, block_id * block_size + offset, -1 = skip
Query head h reads kv head h // (num_q_heads // num_kv_heads).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from engine.kernels import checks
from engine.kernels.decode_plan import decode_plan, padded_batch, span_heads

INT8_MAX = 127.0


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 over the last dim: returns (q int8, scale float32 = absmax / 127).

    Rounds half away from zero; the Triton write kernel does exactly the same float32 steps,
    so both produce identical bytes.
    """
    xf = x.float()
    amax = xf.abs().amax(dim=-1)
    # Tensor by tensor: PyTorch's CUDA division by a Python scalar multiplies by its
    # reciprocal, which can differ from the kernel's IEEE division in the last bit.
    scale = amax / torch.full_like(amax, INT8_MAX)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    y = xf / safe.unsqueeze(-1)
    q = torch.sign(y) * torch.floor(y.abs() + 0.5)
    return q.clamp_(-INT8_MAX, INT8_MAX).to(torch.int8), scale


def write_kv_ref(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping) -> None:
    """Store k, v [num_tokens, num_kv_heads, head_dim] at slot_mapping (in place).

    A float cache stores k, v cast to its dtype; an int8 cache stores them quantised.
    """
    is_int8 = checks.check_write_kv(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping)
    if not is_int8 and not k.is_cuda and (slot_mapping.numel() == 0 or int(slot_mapping.min()) >= 0):
        return write_kv_rows(k, v, k_cache, v_cache, slot_mapping)
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    bs = k_cache.shape[1]
    blk, off = slots // bs, slots % bs
    k, v = k[keep], v[keep]
    if is_int8:
        kq, ks = quantize_int8(k)
        vq, vs = quantize_int8(v)
        k_cache[blk, off], v_cache[blk, off] = kq, vq
        k_scale[blk, off], v_scale[blk, off] = ks, vs
    else:
        k_cache[blk, off], v_cache[blk, off] = k.to(k_cache.dtype), v.to(v_cache.dtype)


def write_kv_rows(k, v, k_cache, v_cache, slot_mapping) -> None:
    """write_kv_ref on the CPU into a float cache when no slot is skipped (every slot >= 0, which
    the caller has checked): two row copies instead of masking and indexing every tensor."""
    h, d = k_cache.shape[2:]
    k_cache.view(-1, h, d).index_copy_(0, slot_mapping, k.to(k_cache.dtype))
    v_cache.view(-1, h, d).index_copy_(0, slot_mapping, v.to(v_cache.dtype))


def rope_write_kv_ref(qkv, num_heads, num_kv_heads, cos, sin, k_cache, v_cache, k_scale, v_scale,
                      slot_mapping) -> torch.Tensor:
    """RoPE on the q and k heads of qkv [N, Hq + 2 Hkv, D] then write_kv of k, v; returns q [N, Hq, D].

    x * cos + rotate_half(x) * sin in float32, rounded once to qkv's dtype (as the compiled
    elementwise RoPE computes it); cos, sin [N, D].
    """
    hq, hkv = num_heads, num_kv_heads
    x = qkv[:, :hq + hkv].float()
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    y = (x * cos.float()[:, None, :] + rot * sin.float()[:, None, :]).to(qkv.dtype)
    write_kv_ref(y[:, hq:], qkv[:, hq + hkv:], k_cache, v_cache, k_scale, v_scale, slot_mapping)
    return y[:, :hq]


def _gather(cache: torch.Tensor, scale: torch.Tensor | None, blocks: torch.Tensor) -> torch.Tensor:
    """Gather whole blocks into float32 [..., n_blocks * block_size, num_kv_heads, head_dim]."""
    x = cache[blocks].float()
    if scale is not None:
        x = x * scale[blocks].unsqueeze(-1)
    return x.flatten(-4, -3)


def paged_decode_attention_ref(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens,
                               sm_scale: float) -> torch.Tensor:
    """One query token per sequence over its cached KV: q [batch, Hq, D] -> out [batch, Hq, D].

    Float32 math, cast to q.dtype; a sequence with seq_len 0 gets zeros.
    """
    checks.check_decode(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens)
    batch, hq, d = q.shape
    bs, hkv = k_cache.shape[1], k_cache.shape[2]
    if batch == 0:
        return torch.empty_like(q)
    if not q.is_cuda:
        return _decode_cpu(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens, sm_scale)
    max_len = int(seq_lens.max())
    nblk = max(1, -(-max_len // bs))
    blocks = block_tables[:, :nblk].long().clamp(min=0)
    k = _gather(k_cache, k_scale, blocks)                    # [B, T, Hkv, D]
    v = _gather(v_cache, v_scale, blocks)
    g = hq // hkv
    qf = q.float().view(batch, hkv, g, d)
    scores = torch.einsum("bhgd,bthd->bhgt", qf, k) * sm_scale
    valid = torch.arange(k.shape[1], device=q.device)[None, :] < seq_lens[:, None].long()
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).nan_to_num_(0.0)        # seq_len 0: all -inf rows
    out = torch.einsum("bhgt,bthd->bhgd", p, v)
    return out.reshape(batch, hq, d).to(q.dtype)


def _span(cache: torch.Tensor, scale: torch.Tensor | None, blocks: torch.Tensor, total: int) -> torch.Tensor:
    """The first ``total`` cached tokens of one sequence, float32 [total, num_kv_heads, head_dim].

    A view of the cache when its blocks are consecutive and already float32 (what a fresh pool
    hands out), so a long prompt's KV is not copied once per chunk and layer; else gathered.
    Reads block ids on the host: CPU only.
    """
    n = blocks.shape[0]
    first = int(blocks[0])
    if scale is None and cache.dtype == torch.float32 and torch.equal(
            blocks, torch.arange(first, first + n, dtype=blocks.dtype)):
        bs = cache.shape[1]
        return cache.view(-1, *cache.shape[2:])[first * bs: first * bs + total]
    return _gather(cache, scale, blocks)[:total]


# A CPU decode step over several short sequences gathers their KV into one padded batch for a
# single attention call when the batch holds at most this many (padded) tokens; past it, each
# sequence's KV is read in place, one call per sequence, rather than copied every layer.
BATCHED_DECODE_MAX_TOKENS = 4096


def _decode_cpu(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens, sm_scale: float):
    """paged_decode_attention_ref on the CPU: one fused attention call per sequence over its KV
    (a view of the cache when its blocks are consecutive), or one for the whole batch when its
    sequences are short (_decode_cpu_batched). A decode step is many tiny ops, and on a busy CPU
    each op's threads wait on the others, so fewer ops is what makes it fast: where the KV lies
    is read once per step (decode_plan), not once per layer."""
    return decode_cpu_planned(q, k_cache, v_cache, k_scale, v_scale, block_tables,
                              decode_plan(block_tables, seq_lens, k_cache.shape[1]), sm_scale)


def decode_cpu_planned(q, k_cache, v_cache, k_scale, v_scale, block_tables, plan, sm_scale: float):
    """_decode_cpu with the step's plan (decode_plan of its block_tables and seq_lens) given:
    a caller that runs every layer of one step itself works the plan out once."""
    batch, hq, d = q.shape
    bs, hkv = k_cache.shape[1], k_cache.shape[2]
    g = hq // hkv
    lens = plan.lens
    live = [b for b, n in enumerate(lens) if n > 0]
    if len(live) > 1 and len(live) * max(lens) <= BATCHED_DECODE_MAX_TOKENS:
        return _decode_cpu_batched(q, k_cache, v_cache, k_scale, v_scale, padded_batch(plan, block_tables, bs),
                                   sm_scale)
    out = None if len(live) == batch == 1 else torch.zeros(batch, hq, d, dtype=q.dtype)
    for b, span in enumerate(plan.spans):
        if span is None:
            continue                                          # seq_len 0: zeros, as documented
        k = span_heads(k_cache, k_scale, span)                # [1, Hkv, n, D]
        v = span_heads(v_cache, v_scale, span)
        qb = q[b].float().view(1, hkv, g, d)                  # the q heads of one kv head as rows
        o = F.scaled_dot_product_attention(qb, k, v, scale=sm_scale)
        if out is None:
            return o.view(1, hq, d).to(q.dtype)
        out[b] = o.view(hq, d).to(q.dtype)
    return out


def _decode_cpu_batched(q, k_cache, v_cache, k_scale, v_scale, pb, sm_scale: float) -> torch.Tensor:
    """_decode_cpu for the live sequences at once: their blocks gathered into [L, Hkv, T, D]
    (T the longest), the padding masked out, one attention call. Which blocks and which mask
    is worked out once a step (decode_plan.padded_batch); when every sequence is live, q and
    the output need no row selection."""
    batch, hq, d = q.shape
    hkv = k_cache.shape[2]
    g = hq // hkv
    k = _gather(k_cache, k_scale, pb.blocks)[:, :pb.n_max].transpose(1, 2)       # [L, Hkv, T, D]
    v = _gather(v_cache, v_scale, pb.blocks)[:, :pb.n_max].transpose(1, 2)
    qs = q if pb.rows is None else q[pb.rows]
    o = F.scaled_dot_product_attention(qs.float().view(qs.shape[0], hkv, g, d), k, v,
                                       attn_mask=pb.mask, scale=sm_scale)
    if pb.rows is None:
        return o.reshape(batch, hq, d).to(q.dtype)
    out = torch.zeros(batch, hq, d, dtype=q.dtype)
    out[pb.rows] = o.reshape(pb.rows.shape[0], hq, d).to(q.dtype)
    return out


def paged_prefill_attention_ref(q, k_cache, v_cache, k_scale, v_scale, block_table,
                                start_pos: int, sm_scale: float) -> torch.Tensor:
    """Causal attention of a chunk q [chunk, Hq, D] at positions start_pos.. over one sequence.

    The chunk's own KV must already be in the cache. Blocks are gathered once, and GQA is a
    reshape (the q heads of one kv head stacked along the query axis) so KV is not repeated.
    """
    _, start_pos = checks.check_prefill(q, k_cache, v_cache, k_scale, v_scale, block_table, start_pos)
    chunk, hq, d = q.shape
    bs, hkv = k_cache.shape[1], k_cache.shape[2]
    if chunk == 0:
        return torch.empty_like(q)
    total = start_pos + chunk
    blocks = block_table[: -(-total // bs)].long()
    g = hq // hkv
    if not q.is_cuda:
        return _prefill_cpu(q, k_cache, v_cache, k_scale, v_scale, blocks, start_pos, sm_scale)
    return _prefill_cuda(q, k_cache, v_cache, k_scale, v_scale, blocks, start_pos, sm_scale)


def _heads(cache: torch.Tensor, scale: torch.Tensor | None, blocks: torch.Tensor, total: int, g: int,
           dtype: torch.dtype) -> torch.Tensor:
    """The first `total` cached tokens of one sequence as [1, Hkv * g, total, D] in `dtype`, each kv
    head repeated for its g q heads (an int8 cache dequantised first)."""
    x = cache[blocks]
    if scale is not None:
        x = x.float() * scale[blocks].unsqueeze(-1)
    x = x.flatten(0, 1)[:total].to(dtype).transpose(0, 1)                  # [Hkv, total, D]
    if g > 1:
        x = x[:, None].expand(x.shape[0], g, total, x.shape[2]).reshape(-1, total, x.shape[2])
    return x[None]


def _prefill_cuda(q, k_cache, v_cache, k_scale, v_scale, blocks, start_pos: int, sm_scale: float):
    """paged_prefill_attention_ref on CUDA, in q's dtype through torch's fused attention kernels:
    flash attention for bf16/fp16, the memory-efficient kernel for float32. Every chunk is causal
    aligned to its last row (`causal_lower_right`; from position 0 that is plain causal), which
    those kernels take without a mask tensor, so no chunk x total score matrix is ever held: the
    float32 math path with a boolean mask it replaces held two, and ran as some ten kernels a layer
    (docs/perf/engine.md). The kv heads are repeated for their q heads: the lower-right kernels take
    no GQA layout.

    A chunk of fewer rows than keys takes the lower-right bias, which calls those kernels itself.
    A chunk from position 0 (as many rows as keys) the bias hands to SDPA with `is_causal=True`,
    whose backend choice on Hopper with torch's bundled cuDNN prefers cuDNN attention; torch
    builds and caches cuDNN's plans per thread and shape, so each prompt length paid for a new
    plan the first time (profiled on the H200 with `python3 scripts/probe_first_shapes.py`;
    docs/perf/engine.md). That call runs with cuDNN attention switched off, leaving flash."""
    chunk, hq, d = q.shape
    hkv = k_cache.shape[2]
    g, total = hq // hkv, start_pos + chunk
    k = _heads(k_cache, k_scale, blocks, total, g, q.dtype)
    v = _heads(v_cache, v_scale, blocks, total, g, q.dtype)
    qh = q.transpose(0, 1)[None]                                            # [1, Hq, chunk, D]
    if chunk < total:
        out = F.scaled_dot_product_attention(qh, k, v, attn_mask=causal_lower_right(chunk, total), scale=sm_scale)
    else:
        # The switch is process-wide (torch keeps no per-thread backend choice), so it is set and
        # restored around this one call; one flag, where sdpa_kernel() saves and sets them all.
        cudnn_on = torch.backends.cuda.cudnn_sdp_enabled()
        torch.backends.cuda.enable_cudnn_sdp(False)
        try:
            out = F.scaled_dot_product_attention(qh, k, v, is_causal=True, scale=sm_scale)
        finally:
            torch.backends.cuda.enable_cudnn_sdp(cudnn_on)
    return out[0].transpose(0, 1).contiguous()


def _prefill_cpu(q, k_cache, v_cache, k_scale, v_scale, blocks, start_pos: int, sm_scale: float):
    """paged_prefill_attention_ref on the CPU, where torch's fused (flash) attention kernel runs
    only on 4-D inputs and is fastest without a mask: a chunk that starts the sequence is plain
    causal attention (the kernel then skips the masked half). A later chunk longer than its
    cached prefix is the same call with q zero-padded over the prefix: the kernel computes each
    row alone, so the chunk's rows come out bit for bit as under the mask, and the padded rows
    cost less than a mask's full score matrix (total^2 / 2 against chunk x total). A chunk no
    longer than its prefix passes its mask."""
    chunk, hq, d = q.shape
    hkv = k_cache.shape[2]
    g, total = hq // hkv, start_pos + chunk
    k = _span(k_cache, k_scale, blocks, total).transpose(0, 1)[None]    # [1, Hkv, total, D]
    v = _span(v_cache, v_scale, blocks, total).transpose(0, 1)[None]
    if start_pos < chunk:
        qf = q.float()
        if start_pos:
            qf = torch.cat([qf.new_zeros(start_pos, hq, d), qf])
        out = F.scaled_dot_product_attention(qf.transpose(0, 1)[None], k, v, is_causal=True,
                                             scale=sm_scale, enable_gqa=g > 1)
        return out[0, :, start_pos:].transpose(0, 1).to(q.dtype)
    qf = q.float().view(chunk, hkv, g, d).permute(1, 2, 0, 3).reshape(1, hkv, g * chunk, d)
    pos = start_pos + torch.arange(chunk).repeat(g)                      # row r -> r % chunk
    mask = torch.arange(total)[None, :] <= pos[:, None]
    out = F.scaled_dot_product_attention(qf, k, v, attn_mask=mask, scale=sm_scale)
    return out.view(hkv, g, chunk, d).permute(2, 0, 1, 3).reshape(chunk, hq, d).to(q.dtype)
