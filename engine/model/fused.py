"""The model's elementwise pieces (RMSNorm, RoPE, SwiGLU's gate), written as transformers writes
them, and optionally compiled by torch.compile into fused kernels on CUDA.

Decode at batch 1 is bound by reading the weights, and every separate small kernel adds its
launch and its own pass over the activations per layer; fusing them shortens the decode step
(figures in docs/perf/engine.md)."""
from __future__ import annotations

import threading
from contextlib import contextmanager

import torch
import torch.nn.functional as F


# (width, eps) -> both as float32 0-dim tensors, for the CPU float32 RMSNorm below.
_F32_SCALARS: dict[tuple[int, float], tuple[torch.Tensor, torch.Tensor]] = {}


def _f32_scalars(n: int, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """n and eps as float32 tensors. A Python number in a tensor call is wrapped as a 0-dim
    int64 or float64 tensor and cast to float32 on each call, two extra tensor calls an RMSNorm;
    the cast values are the ones cached here, so the results are the same bits."""
    got = _F32_SCALARS.get((n, eps))
    if got is None:
        with torch.inference_mode(False):    # plain tensors: usable in and out of inference mode
            got = _F32_SCALARS[(n, eps)] = (torch.tensor(float(n)), torch.tensor(eps, dtype=torch.float32))
    return got


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32 and weight.dtype == torch.float32 and not x.is_cuda:
        # The lines below without their no-op casts, mean() as the sum and division it runs,
        # and in place on its own temporaries: bit-identical in float32
        # (tests/engine/test_fused_ops.py), in fewer tensor calls than F.rms_norm, which runs
        # the same steps on the CPU; each call is costly right after a product.
        n_t, eps_t = _f32_scalars(x.shape[-1], eps)
        var = (x * x).sum(-1, keepdim=True).div_(n_t)
        return x * var.add_(eps_t).rsqrt_() * weight
    # Normalise in float32, cast back, then scale: transformers' order of operations.
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def _add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    """(rms_norm(residual + x), residual + x): the residual add fused with the next norm."""
    summed = residual + x
    return _rms_norm(summed, weight, eps), summed


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [N, heads, D]; cos/sin [N, D] (halves repeated) in x's dtype: q*cos + rotate_half(q)*sin."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def _silu_mul(gate_up: torch.Tensor, inter: int) -> torch.Tensor:
    # Slices, not Tensor.split: the same two views without split's Python wrapper.
    return F.silu(gate_up[..., :inter]) * gate_up[..., inter:]


# Prefill passes of fewer rows than this run the eager ops on CUDA too (prefer_eager). Each call
# of a compiled op runs through some 150 Python calls of Dynamo's, AOTAutograd's and Inductor's
# wrappers, which a CUDA graph hides in decode but an eager prefill pays, and a short pass is
# bound by the host; a long one is bound by the GPU, where the fused kernels save time instead
# (`python3 scripts/bench_prefill_host.py`; figures in docs/perf/engine.md).
EAGER_PREFILL_ROWS = 1024
_here = threading.local()     # per thread: the scheduler's prefill must not switch another's decode


def prefer_eager(rows: int, decode: bool, on_cuda: bool) -> bool:
    """Whether a forward pass of `rows` rows should call the eager ops although compiled ones are
    in use: a prefill pass on CUDA of fewer than EAGER_PREFILL_ROWS rows."""
    return on_cuda and not decode and _compiled and rows < EAGER_PREFILL_ROWS


@contextmanager
def eager_ops(on: bool):
    """Within the block, on this thread, CUDA inputs take the eager ops when `on` (prefer_eager)."""
    before = getattr(_here, "eager", False)
    _here.eager = on
    try:
        yield
    finally:
        _here.eager = before


def _cuda_only(compiled, eager):
    """The compiled op for CUDA inputs, the eager one for any other device (and inside
    eager_ops(True)).

    Compiled code is specialised to a device: a process that also runs a model on the CPU (the
    rebinding below is process-wide) would recompile each op for it until Dynamo's recompile
    limit, which under fullgraph=True is a hard error mid-request, not a slow path."""
    def op(x: torch.Tensor, *args):
        return compiled(x, *args) if x.is_cuda and not getattr(_here, "eager", False) else eager(x, *args)
    op.__name__ = eager.__name__
    return op


# Compiled variants one op may keep (enable_compile says why); 3 dtypes x 2 ranks x 2 row classes
# is 12, and weights of another dtype than their inputs add more.
RECOMPILE_LIMIT = 64

_EAGER = {"rms_norm": _rms_norm, "add_rms_norm": _add_rms_norm, "rope": _rope, "silu_mul": _silu_mul}
# The names the model calls; enable_compile() rebinds them.
rms_norm, add_rms_norm, rope, silu_mul = _rms_norm, _add_rms_norm, _rope, _silu_mul
_compiled = False


def enable_compile() -> bool:
    """Swap in torch.compile'd versions (CUDA only); False, and eager kept, if compiling fails."""
    global _compiled, rms_norm, add_rms_norm, rope, silu_mul
    if _compiled:
        return True
    # Dynamo keeps at most recompile_limit (8) compiled variants of one function, and under
    # fullgraph=True a call past that is a hard error, not a slow path. Each op is compiled
    # once per input dtype, rank and one-row-or-more (float32, bf16 and fp16 models, q/k norms
    # over 3-D heads, batch-1 decode), so a process that serves models of several dtypes
    # reached the limit mid-request. Process-wide, as the rebinding below is.
    import torch._dynamo.config as dynamo_config
    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
    try:
        c = {k: torch.compile(f, dynamic=True, fullgraph=True) for k, f in _EAGER.items()}
        dev = torch.device("cuda")
        x = torch.randn(3, 4, 8, device=dev, dtype=torch.bfloat16)
        c["rms_norm"](x, torch.ones(8, device=dev, dtype=torch.bfloat16), 1e-6)
        cs = torch.ones(3, 8, device=dev, dtype=torch.bfloat16)
        c["rope"](x, cs, cs)
        c["silu_mul"](x.view(3, 32), 16)
        c["add_rms_norm"](x, x, torch.ones(8, device=dev, dtype=torch.bfloat16), 1e-6)
    except Exception:   # noqa: BLE001 - no compiler toolchain here: the eager versions stay
        return False
    ops = {k: _cuda_only(c[k], _EAGER[k]) for k in _EAGER}
    rms_norm, add_rms_norm, rope, silu_mul = ops["rms_norm"], ops["add_rms_norm"], ops["rope"], ops["silu_mul"]
    _compiled = True
    return True


def is_compiled() -> bool:
    """Whether the compiled (fused, float32-internal) versions are in use."""
    return _compiled


def disable_compile() -> None:
    global _compiled, rms_norm, add_rms_norm, rope, silu_mul
    rms_norm, add_rms_norm = _EAGER["rms_norm"], _EAGER["add_rms_norm"]
    rope, silu_mul = _EAGER["rope"], _EAGER["silu_mul"]
    _compiled = False
