"""Llama / Qwen3 decoder over a paged KV cache: GQA, RoPE, RMSNorm, SwiGLU, optional q/k norms.

Tokens are flattened: a forward pass takes input_ids [N] and positions [N] plus an AttnMeta
that says whether they are one sequence's prefill chunk or one token of each of B sequences.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from engine.model import fused
from engine.model.config import ModelConfig
from engine.model.projection import Projection
from engine.model.rope import cos_sin_table


@dataclass
class AttnMeta:
    slot_mapping: torch.Tensor              # [N] int64 flat KV slots written by this pass
    decode: bool
    block_tables: torch.Tensor | None = None  # decode: [B, M] int32, -1 padded
    seq_lens: torch.Tensor | None = None      # decode: [B] int32, including the current token
    block_table: torch.Tensor | None = None   # prefill: [M] int32 of the one sequence
    start_pos: int = 0                        # prefill: position of the first token


# A long CPU prefill computes its row-wise work (projections, RoPE, the KV write, norms, the MLP)
# in blocks of about this many rows (Block.forward says why): `python scripts/bench_cpu_row_blocks.py`
# timed blocks of 512-2,048 rows against one pass on the reference model (docs/perf/reference-model.md).
ROW_BLOCK = 1024


def row_blocks(n: int) -> list[tuple[int, int]]:
    """[start, end) spans covering n rows in equal blocks of at most ROW_BLOCK rows: no short last
    block, whose product the BLAS might run with another kernel."""
    count = -(-n // ROW_BLOCK)
    size = -(-n // count)
    return [(s, min(n, s + size)) for s in range(0, n, size)]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused.rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.h, self.kvh, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.qkv = Projection(cfg.hidden_size, (self.h + 2 * self.kvh) * self.d, bias=cfg.attention_bias)
        self.o = Projection(self.h * self.d, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.d, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.d, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.sm_scale = self.d ** -0.5

    def forward(self, x, cos, sin, meta: AttnMeta, ops, cache):
        n = x.shape[0]
        kc, vc, ks, vs = cache
        if x.is_cuda or meta.decode or n <= ROW_BLOCK:
            q = self._project_rope_write(x, cos, sin, meta.slot_mapping, ops, cache)
        else:
            # A long CPU prefill: the projection, RoPE and KV write of each block of rows in
            # turn, into the contiguous q the attention takes (Block.forward says why blocks).
            q = x.new_empty(n, self.h, self.d)
            for s, e in row_blocks(n):
                q[s:e] = self._project_rope_write(x[s:e], cos[s:e], sin[s:e], meta.slot_mapping[s:e],
                                                  ops, cache)
        if meta.decode:
            q = q if q.is_cuda else q.contiguous()     # the CPU references reshape q with view()
            o = ops.paged_decode_attention(q, kc, vc, ks, vs, meta.block_tables, meta.seq_lens, self.sm_scale)
        else:
            o = ops.paged_prefill_attention(q.contiguous(), kc, vc, ks, vs, meta.block_table, meta.start_pos,
                                            self.sm_scale)
        return self.o(o.reshape(n, self.h * self.d))

    def _project_rope_write(self, x, cos, sin, slots, ops, cache) -> torch.Tensor:
        """q [rows, heads, dim] of x's rows, after writing their rotated k and their v to the cache."""
        n = x.shape[0]
        qkv = self.qkv(x).view(n, self.h + 2 * self.kvh, self.d)
        v = qkv[:, self.h + self.kvh:]
        if self.q_norm is not None:
            q = fused.rope(self.q_norm(qkv[:, :self.h]), cos, sin)
            k = fused.rope(self.k_norm(qkv[:, self.h:self.h + self.kvh]), cos, sin)
        kc, vc, ks, vs = cache
        rope_write = getattr(ops, "rope_write_kv", None)
        if (self.q_norm is None and rope_write is not None and fused.is_compiled() and x.is_cuda
                and (kc.dtype == torch.int8 or kc.dtype == qkv.dtype)):
            # With the compiled elementwise ops on CUDA: RoPE and the KV write in one kernel,
            # computing what the compiled RoPE computes (float32, one rounding).
            return rope_write(qkv, self.h, self.kvh, cos, sin, kc, vc, ks, vs, slots)
        if self.q_norm is None:   # q and k heads rotate together: one set of kernels instead of two
            qk = fused.rope(qkv[:, :self.h + self.kvh], cos, sin)
            q, k = qk[:, :self.h], qk[:, self.h:]
        if kc.dtype != torch.int8 and kc.dtype != k.dtype:   # e.g. a bf16 cache under fp32 compute
            k, v = k.to(kc.dtype), v.to(kc.dtype)
        # The kernels take strided k/v/q (head_dim contiguous); copies would cost kernels per layer.
        ops.write_kv(k, v, kc, vc, ks, vs, slots)
        return q


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.inter = cfg.intermediate_size
        self.gate_up = Projection(cfg.hidden_size, 2 * self.inter, bias=False)
        self.down = Projection(self.inter, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down(fused.silu_mul(self.gate_up(x), self.inter))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, h, residual, cos, sin, meta, ops, cache, next_norm: RMSNorm):
        """h: this block's normed input; returns (next_norm(new residual), new residual)."""
        a = self.attn(h, cos, sin, meta, ops, cache)
        if a.is_cuda or meta.decode or a.shape[0] <= ROW_BLOCK:
            h, residual = fused.add_rms_norm(a, residual, self.mlp_norm.weight, self.mlp_norm.eps)
            m = self.mlp(h)
            return fused.add_rms_norm(m, residual, next_norm.weight, next_norm.eps)
        # A long CPU prefill: everything after the attention is row-wise, and done block by
        # block. A whole prompt's gate/up product is [rows, 2 x intermediate] floats, past the size
        # above which the C allocator maps fresh pages for an allocation and unmaps them on free:
        # every layer paid a page fault per 4 KiB of it and of SwiGLU's temporaries. Blocks keep
        # the temporaries small enough to be reused from the heap and warm in cache from one op to
        # the next, and each block's results go back into the rows of a and residual it was read
        # from (rows are independent; both are this pass's own).
        # `python scripts/bench_cpu_row_blocks.py`; docs/perf/reference-model.md.
        for s, e in row_blocks(a.shape[0]):
            hb, rb = fused.add_rms_norm(a[s:e], residual[s:e], self.mlp_norm.weight, self.mlp_norm.eps)
            a[s:e], residual[s:e] = fused.add_rms_norm(self.mlp(hb), rb, next_norm.weight, next_norm.eps)
        return a, residual


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, max_positions: int | None = None):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        # Logits of any number of rows read the row-major weight where one is kept (the CPU:
        # engine.model.layout.keep_row_major_copies), and come back as a transposed view.
        self.lm_head = Projection(cfg.hidden_size, cfg.vocab_size, bias=False, rows_max=None,
                                  contiguous=False)
        self.max_positions = max_positions or cfg.max_position_embeddings
        self.rope_cos: torch.Tensor | None = None
        self.rope_sin: torch.Tensor | None = None

    def setup_rope(self, device) -> None:
        self.rope_cos, self.rope_sin = cos_sin_table(self.cfg, self.max_positions, device)
        self._rope_cast = {}

    def _rope_tables(self, dtype):
        """cos/sin tables cast to dtype once (a cast then a gather equals a gather then a cast):
        two kernels a step fewer than casting the gathered rows."""
        cast = getattr(self, "_rope_cast", None)
        if cast is None or cast.get("src") is not self.rope_cos:
            cast = self._rope_cast = {"src": self.rope_cos}
        if dtype not in cast:
            cast[dtype] = (self.rope_cos.to(dtype), self.rope_sin.to(dtype))
        return cast[dtype]

    @torch.inference_mode()
    def forward(self, input_ids, positions, meta: AttnMeta, ops, caches, logit_rows=None):
        """Logits (float32) for every token, or only for rows logit_rows when given."""
        residual = self.embed(input_ids)
        cos_t, sin_t = self._rope_tables(residual.dtype)
        cos, sin = cos_t[positions], sin_t[positions]
        # A short prefill pass on CUDA is bound by the host, where the compiled elementwise ops
        # cost more than the eager ones (fused.EAGER_PREFILL_ROWS says how much).
        with fused.eager_ops(fused.prefer_eager(input_ids.shape[0], meta.decode, input_ids.is_cuda)):
            h = self.layers[0].attn_norm(residual)
            # Each residual add is fused with the RMSNorm that follows it (the next block's
            # attn_norm, or the final norm after the last block).
            nexts = [layer.attn_norm for layer in self.layers[1:]] + [self.norm]
            for layer, cache, next_norm in zip(self.layers, caches, nexts):
                h, residual = layer(h, residual, cos, sin, meta, ops, cache, next_norm)
        if logit_rows is not None:
            h = h[logit_rows]
        return self.lm_head(h).float()
