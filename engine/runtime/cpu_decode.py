"""The decode step on the CPU as one flat loop over the layers.

On the CPU a batch-1 decode step of the reference model is some 20 ms of products that stream
the weights and, through the model's modules, 13 ms of everything else. Each small torch call
of a layer runs right after a product has flushed the core's caches, so its Python and its
dispatch cost several times what they cost in a tight loop; the module tree, the ops' argument
checks and their per-layer lookups add calls of their own.

CpuDecode computes the operations Transformer.forward computes over the reference ops, in the
same order on the same tensors, so its logits are the model's bit for bit
(tests/engine/test_cpu_decode.py). What it does once a step instead of once a layer: it reads
the parameters (straight from each module's parameter dict, in one tight loop), works out the
KV plan and whether any slot is skipped, and checks the ops' arguments (on the first layer,
whose shapes every layer shares). No module is called but the logits' projection. Figures:
docs/perf/reference-model.md.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.kernels import checks, reference
from engine.kernels.decode_plan import decode_plan
from engine.model import fused
from engine.model.transformer import AttnMeta, Transformer


def _param(module, name: str = "weight"):
    # The module's own dict: nn.Module.__getattr__ costs a Python call per lookup. Read every
    # step, so a weight that engine.model.layout re-lays (a new Parameter) is the one used.
    return None if module is None else module._parameters[name]


class CpuDecode:
    """Decode-path forwards of one model over one pool's float caches, with the reference ops."""

    def __init__(self, model: Transformer):
        self.model = model
        cfg = model.cfg
        self.h, self.kvh, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.inter = cfg.intermediate_size
        self.sm_scale = model.layers[0].attn.sm_scale
        nexts = [layer.attn_norm for layer in model.layers[1:]] + [model.norm]
        self.layers = [(layer.attn, layer.mlp, layer.mlp_norm, next_norm) for layer, next_norm in zip(model.layers, nexts)]
        self._signed_sin: tuple[torch.Tensor, torch.Tensor] | None = None    # (the table it came from, it)

    def _rope_rows(self, dtype, positions) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's cos rows and sin rows [N, 1, D], sin's first half negated.

        fused.rope computes x * cos + cat(-x2, x1) * sin. With sin's first half negated that is
        x * cos + x.roll(D / 2) * sin, the same bits ((-a) * b == a * (-b) in IEEE arithmetic;
        tests/engine/test_cpu_decode.py): one tensor call for the negation, two slices and the
        concatenation, and the rows broadcast over the heads once a step, not once a layer."""
        cos_t, sin_t = self.model._rope_tables(dtype)
        if self._signed_sin is None or self._signed_sin[0] is not sin_t:
            half = sin_t.shape[-1] // 2
            self._signed_sin = (sin_t, torch.cat((-sin_t[:, :half], sin_t[:, half:]), dim=-1))
        return cos_t[positions].unsqueeze(1), self._signed_sin[1][positions].unsqueeze(1)

    @staticmethod
    def fits(model: Transformer, ops, caches) -> bool:
        """Whether this loop computes what the model computes here: the CPU, the reference
        ops (not Triton interpreted on the CPU) and float caches."""
        return (getattr(ops, "name", None) == "torch" and not model.embed.weight.is_cuda
                and all(c[0].dtype != torch.int8 for c in caches))

    def _step_params(self) -> list[tuple]:
        return [(attn.qkv, _param(attn.qkv), _param(attn.qkv, "bias"), _param(attn.q_norm), _param(attn.k_norm),
                 attn.o, _param(attn.o), mlp.gate_up, _param(mlp.gate_up), mlp.down, _param(mlp.down),
                 _param(mlp_norm), _param(next_norm))
                for attn, mlp, mlp_norm, next_norm in self.layers]

    @torch.inference_mode()
    def forward(self, input_ids, positions, meta: AttnMeta, caches) -> torch.Tensor:
        """Transformer.forward(input_ids, positions, meta, ops, caches) for a decode-path meta."""
        model, hq, kvh, d, inter = self.model, self.h, self.kvh, self.d, self.inter
        n = input_ids.shape[0]
        # Several rows read a projection's row-major copy where it keeps one (engine.model.projection).
        multi_row = n >= 2

        def product(module, w, b, x):
            return module.forward(x) if multi_row and module.rows is not None else F.linear(x, w, b)

        slots, tables = meta.slot_mapping, meta.block_tables
        plan = decode_plan(tables, meta.seq_lens, caches[0][0].shape[1])
        no_slot_skipped = slots.numel() == 0 or int(slots.min()) >= 0
        params = self._step_params()
        first = model.layers[0].attn_norm
        eps = model.cfg.rms_norm_eps        # every RMSNorm of the model, q and k norms too
        residual = F.embedding(input_ids, _param(model.embed))
        cos, sin = self._rope_rows(residual.dtype, positions)
        half = d // 2

        def rope(x):
            return x * cos + x.roll(half, -1) * sin

        h = fused.rms_norm(residual, _param(first), eps)
        for i, (p, cache) in enumerate(zip(params, caches)):
            qkv_m, qkv_w, qkv_b, qn_w, kn_w, o_m, o_w, gu_m, gu_w, down_m, down_w, mlp_norm_w, next_w = p
            kc, vc, ks, vs = cache
            qkv = product(qkv_m, qkv_w, qkv_b, h).view(n, hq + 2 * kvh, d)
            v = qkv[:, hq + kvh:]
            if qn_w is not None:
                q = rope(fused.rms_norm(qkv[:, :hq], qn_w, eps))
                k = rope(fused.rms_norm(qkv[:, hq:hq + kvh], kn_w, eps))
            else:
                qk = rope(qkv[:, :hq + kvh])
                q, k = qk[:, :hq], qk[:, hq:]
            if kc.dtype != k.dtype:
                k, v = k.to(kc.dtype), v.to(kc.dtype)
            q = q.contiguous()
            if i == 0:       # every layer's tensors have the first layer's shapes and devices
                checks.check_write_kv(k, v, kc, vc, ks, vs, slots)
                checks.check_decode(q, kc, vc, ks, vs, tables, meta.seq_lens)
            if no_slot_skipped:
                reference.write_kv_rows(k, v, kc, vc, slots)
            else:
                reference.write_kv_ref(k, v, kc, vc, ks, vs, slots)
            o = reference.decode_cpu_planned(q, kc, vc, ks, vs, tables, plan, self.sm_scale)
            a = product(o_m, o_w, None, o.reshape(n, hq * d))
            h, residual = fused.add_rms_norm(a, residual, mlp_norm_w, eps)
            m = product(down_m, down_w, None, fused.silu_mul(product(gu_m, gu_w, None, h), inter))
            h, residual = fused.add_rms_norm(m, residual, next_w, eps)
        return model.lm_head(h).float()
