"""The batch-1 decode step with every layer in one persistent kernel (engine.kernels.triton_persistent).

DecodeGraphs captures this step for its batch-1 bucket when the model, the pool and the GPU fit
it (`unfit` says why not otherwise), and the layered step for every other bucket. It is the
token's embedding row, the kernel, then the final norm, the logits and (in DecodeGraphs) the
argmax. Its logits agree with the layered step's to bf16 noise (split-K sums in another order);
before capture, `self_check` runs both on the same token and keeps this step only if no barrier
timed out and both pick the same token.

The kernel reads each kind of weight as one [layers, in, out] tensor, so the layers' projection
weights are moved into one such tensor a kind and each layer's weight becomes a view of it, with
the strides it had (the column-major layout engine.model.layout gives CUDA weights): no second
copy, and the layered products read the same bytes as before.

ENGINE_PERSISTENT_DECODE=0 turns it off (the layered step for every bucket), for comparisons."""
from __future__ import annotations

import os

import torch
from torch import nn

from engine.kernels import triton_persistent as kernel
from engine.model import fused

ENV = "ENGINE_PERSISTENT_DECODE"
# The H200's best measured config for the 8B shape (docs/perf/engine.md): two programs an SM,
# 64 x 128 weight tiles, 4 warps, 3 pipeline stages, these split-K counts a product. A model whose
# sizes they do not divide takes the largest power of two below that does.
PER_SM, BK, BN, BR, WARPS, STAGES = 2, 64, 128, 128, 4, 3
SPLITS = {"qkv": 16, "o": 8, "gate_up": 1, "down": 8}
KINDS = (("qkv", "attn.qkv"), ("o", "attn.o"), ("gate_up", "mlp.gate_up"), ("down", "mlp.down"))
# Attention splits: 128 tokens each (the best at 1K on the H200), longer past 64 x 128 tokens so that
# the merge loads at most 64 at once; the kernel picks each step's split from its length.
SPLIT_MIN, MAX_SPLITS = 128, 64


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _split(k: int, want: int) -> int:
    s = want
    while s > 1 and k % (s * BK):
        s //= 2
    return s


def unfit(model, pool, device: torch.device, capability: tuple[int, int] | None = None) -> str | None:
    """Why this step cannot run this model over this pool on device (of that compute capability,
    asked of the device when not given), or None."""
    cfg = model.cfg
    if not enabled():
        return f"{ENV}=0"
    if device.type != "cuda":
        return "not a CUDA device"
    if (capability or torch.cuda.get_device_capability(device))[0] != 9:
        return "needs an sm_90 GPU (TMA descriptors; tuned on the H200)"
    dtype = model.embed.weight.dtype
    if dtype != torch.bfloat16 or pool.dtype != torch.bfloat16:
        return f"needs bf16 weights and a bf16 KV cache (have {dtype} and {pool.dtype})"
    if cfg.qk_norm or cfg.attention_bias:
        return "q/k norms and qkv biases are not in the kernel"
    if cfg.head_dim != 128 or cfg.num_heads % cfg.num_kv_heads or cfg.num_heads // cfg.num_kv_heads > 16:
        return "needs head_dim 128 and at most 16 q heads a kv head"
    h, i, q = cfg.hidden_size, cfg.intermediate_size, (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim
    if any(n % BN or k % BK for k, n in ((h, q), (cfg.num_heads * cfg.head_dim, h), (h, 2 * i), (i, h))):
        return f"the projections' sizes do not tile by {BK} x {BN}"
    if h & (h - 1):
        return "the hidden size must be a power of two (the norms load the residual at once)"
    for layer in model.layers:
        for _, path in KINDS:
            p = layer.get_submodule(path)
            if p.bias is not None or p.weight.dtype != dtype or p.weight.t().stride() != (p.weight.shape[0], 1):
                return f"{path}: needs a bias-free, column-major {dtype} weight"
    if not (pool.k.is_contiguous() and pool.v.is_contiguous()):
        return "needs the pool's contiguous bf16 layout"
    return None


def _stacked(model, path: str) -> torch.Tensor:
    """The [layers, in, out] tensor that holds every layer's weight at `path`, each layer's weight
    becoming its view (made once; the model keeps it)."""
    stacks = model.__dict__.setdefault("_persistent_stacks", {})
    if path in stacks:
        return stacks[path]
    projs = [layer.get_submodule(path) for layer in model.layers]
    w0 = projs[0].weight
    stack = torch.empty((len(projs), w0.shape[1], w0.shape[0]), dtype=w0.dtype, device=w0.device)
    for n, p in enumerate(projs):
        stack[n].copy_(p.weight.t())
        p.weight = nn.Parameter(stack[n].t(), requires_grad=False)     # the old weight is freed here
    stacks[path] = stack
    return stack


class PersistentDecode:
    """The kernel's launch over one model and pool: stacked weights and their TMA descriptors, the
    per-layer norm weights, RoPE tables, float32 scratch for split-K partial sums and attention
    splits, and the barrier words (sync[0] the arrival counter, zeroed each launch; sync[1] the
    failure flag, sticky, read by the host with each step's tokens). forward() is capturable."""

    def __init__(self, model, pool):
        from triton.tools.tensor_descriptor import TensorDescriptor
        cfg, dev = model.cfg, pool.device
        self.model, self.cfg = model, cfg
        h, i, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
        q = (cfg.num_heads + 2 * cfg.num_kv_heads) * d
        ins = {"qkv": h, "o": cfg.num_heads * d, "gate_up": h, "down": i}
        self.splits = {k: _split(ins[k], v) for k, v in SPLITS.items()}
        self.descs = tuple(TensorDescriptor.from_tensor(_stacked(model, path), [1, BK, BN]) for _, path in KINDS)
        self.n1 = torch.stack([layer.attn_norm.weight for layer in model.layers]).contiguous()
        self.n2 = torch.stack([layer.mlp_norm.weight for layer in model.layers]).contiguous()
        self.kc, self.vc = pool.k, pool.v
        self.layer_stride = pool.k.stride(0)
        self.cos, self.sin = (t.contiguous() for t in model._rope_tables(torch.bfloat16))
        f32 = dict(dtype=torch.float32, device=dev)
        widest = max(self.splits["qkv"] * q, self.splits["gate_up"] * 2 * i, self.splits["o"] * h,
                     self.splits["down"] * h)
        self.part, self.part2 = torch.empty(widest, **f32), torch.empty(widest, **f32)
        self.q = torch.empty(cfg.num_heads * d, dtype=torch.bfloat16, device=dev)
        self.att_o = torch.empty(cfg.num_heads * MAX_SPLITS * d, **f32)
        self.att_ml = torch.empty(cfg.num_heads * MAX_SPLITS * 2, **f32)
        self.r = torch.empty(h, **f32)
        self.sync = torch.zeros(2, dtype=torch.int32, device=dev)
        self.nprog = torch.cuda.get_device_properties(dev).multi_processor_count * PER_SM

    def _args(self, table: torch.Tensor, lens: torch.Tensor, slots: torch.Tensor) -> tuple[tuple, dict]:
        c, s = self.cfg, self.splits
        args = (self.r, self.n1, self.n2, *self.descs, self.part, self.part2, self.q, self.sync, self.kc, self.vc,
                self.layer_stride, self.cos, self.sin, self.att_o, self.att_ml, c.head_dim ** -0.5, c.rms_norm_eps,
                table, lens, slots)
        meta = dict(LAYERS=c.num_layers, H=c.hidden_size, I=c.intermediate_size, HEADS=c.num_heads,
                    KV=c.num_kv_heads, D=c.head_dim, PAGE=self.kc.shape[2], S_QKV=s["qkv"], S_O=s["o"],
                    S_GU=s["gate_up"], S_D=s["down"], BK=BK, BN=BN, BR=BR, SPLIT_MIN=SPLIT_MIN, NS2=MAX_SPLITS,
                    num_warps=WARPS, num_stages=STAGES)
        return args, meta

    def _launch(self, table: torch.Tensor, lens: torch.Tensor, slots: torch.Tensor) -> None:
        args, meta = self._args(table, lens, slots)
        self.sync[:1].zero_()          # the arrival counter; the failure flag sync[1] stays set once set
        kernel.decode_layers_kernel[(self.nprog,)](*args, **meta)

    def resident(self, table, lens, slots) -> int:
        """Programs an SM that the compiled kernel's registers and shared memory let run at once
        (compiles it; runs nothing): every program must be resident, or the barriers wait."""
        args, meta = self._args(table, lens, slots)
        k = kernel.decode_layers_kernel.warmup(*args, grid=(self.nprog,), **meta)
        k._init_handles()                          # fills n_regs
        threads = 32 * WARPS
        by_regs = 65536 // max(1, k.n_regs * threads)
        props = torch.cuda.get_device_properties(self.r.device)
        smem = getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
        by_smem = smem // (k.metadata.shared + 1024) if k.metadata.shared else 32
        return min(by_regs, by_smem)

    def forward(self, ids: torch.Tensor, table: torch.Tensor, lens: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """Logits [1, vocab] (float32) of the one token ids[0]; table [1, width] int32, lens [1]
        int32 (the new token included), slots [1] int64."""
        m = self.model
        self.r.copy_(m.embed.weight[ids[:1]].view(-1))
        self._launch(table, lens, slots)
        h = fused.rms_norm(self.r.to(torch.bfloat16).view(1, -1), m.norm.weight, m.norm.eps)
        return m.lm_head(h).float()

    def failed(self) -> bool:
        """Whether a barrier of any launch since the flag was cleared timed out (results wrong since)."""
        return bool(self.sync[1].item())

    def failed_flag(self) -> torch.Tensor:
        """The failure flag on the device (int32 [1]), for the host to copy with a step's tokens."""
        return self.sync[1:]


def self_check(step: PersistentDecode, layered_logits: torch.Tensor, ids, table, lens, slots) -> str | None:
    """Run the step on the inputs the layered step just ran on; why it must not be used, or None."""
    if step.resident(table, lens, slots) < PER_SM:
        return f"the kernel does not fit {PER_SM} programs an SM"
    step.sync.zero_()
    logits = step.forward(ids, table, lens, slots)
    torch.cuda.synchronize()
    if step.failed():
        return "a grid barrier timed out (the programs were not all resident)"
    if not torch.isfinite(logits).all() or int(logits.argmax()) != int(layered_logits.argmax()):
        return "its logits disagree with the layered step's"
    return None
