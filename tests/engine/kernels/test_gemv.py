"""Decode GEMV kernels (RMSNorm or SwiGLU gate folded into the projection) against the references."""

from __future__ import annotations

import pytest
import torch

from engine.kernels import ops
from engine.kernels.errors import KernelInputError
from engine.kernels.reference import norm_linear_ref, silu_linear_ref
from engine.kernels.triton_gemv import GemvConfig, norm_linear_triton, silu_linear_triton
from tests.engine.kernels.paged_inputs import randn

# max |kernel - reference| / max |reference|: float32 differs only in summation order; bf16
# also in the inputs' last bit where the norm's sum of squares or the gate rounds differently.
BOUND = {torch.float32: 1e-5, torch.bfloat16: 1.5e-2}
CONFIGS = [None, GemvConfig(block_n=16, block_k=128, num_warps=4, num_stages=2),
           GemvConfig(block_n=64, block_k=64, num_warps=8, num_stages=3)]


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,k,n", [(1, 200, 77), (5, 96, 130), (17, 64, 40)])
@pytest.mark.parametrize("residual,bias", [(True, False), (False, True)])
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "n16k128", "n64k64"])
def test_norm_linear_matches_reference(device, gen, dtype, m, k, n, residual, bias, config):
    x = randn(gen, m, k, dtype=dtype, device=device, scale=2.0)
    res = randn(gen, m, k, dtype=dtype, device=device, scale=3.0) if residual else None
    nw = randn(gen, k, dtype=dtype, device=device) + 1
    w = randn(gen, n, k, dtype=dtype, device=device, scale=0.05)
    b = randn(gen, n, dtype=dtype, device=device) if bias else None
    y_ref, s_ref = norm_linear_ref(x, res, nw, 1e-5, w, b)
    y, s = norm_linear_triton(x, res, nw, 1e-5, w, b, config=config)
    assert y.shape == (m, n) and y.dtype == dtype and s.shape == (m, k)
    assert _rel_err(y, y_ref) < BOUND[dtype]
    if residual:
        torch.testing.assert_close(s, s_ref, rtol=0, atol=0) if device.type == "cuda" else \
            torch.testing.assert_close(s.float(), s_ref.float(), rtol=1e-2, atol=1e-2)   # interpreter's bf16
    else:
        assert s is x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,k,n", [(1, 300, 50), (8, 128, 96), (32, 48, 33)])
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "n16k128", "n64k64"])
def test_silu_linear_matches_reference(device, gen, dtype, m, k, n, config):
    gate_up = randn(gen, m, 2 * k, dtype=dtype, device=device, scale=2.0)
    w = randn(gen, n, k, dtype=dtype, device=device, scale=0.05)
    y = silu_linear_triton(gate_up, w, config=config)
    assert y.shape == (m, n) and y.dtype == dtype
    assert _rel_err(y, silu_linear_ref(gate_up, w)) < BOUND[dtype]


def test_rows_take_the_whole_output_not_a_neighbours(device, gen):
    """Every output row depends on its own input row only (padding rows add nothing)."""
    k, n = 64, 48
    x = randn(gen, 3, k, device=device)
    nw = torch.ones(k, device=device)
    w = randn(gen, n, k, device=device)
    y3, _ = norm_linear_triton(x, None, nw, 1e-6, w)
    y1, _ = norm_linear_triton(x[1:2].contiguous(), None, nw, 1e-6, w)
    assert _rel_err(y3[1:2], y1) < 1e-6
    assert _rel_err(y3[0:1], y1) > 1e-2          # and rows do differ: the comparison can fail


@pytest.mark.parametrize("m", [1, 8])
@pytest.mark.parametrize("k,n", [(4096, 6144), (4096, 28672)])
def test_8b_shapes(device, gen, m, k, n):
    """The 8B config's qkv / gate_up shapes (and down: k <-> n) on the GPU; an eighth of each
    side under the CPU interpreter, whose kernels run program by program in Python."""
    if device.type != "cuda":
        k, n = k // 8, n // 8
    dt = torch.bfloat16
    x, res = randn(gen, m, k, dtype=dt, device=device), randn(gen, m, k, dtype=dt, device=device)
    nw = randn(gen, k, dtype=dt, device=device) + 1
    w = randn(gen, n, k, dtype=dt, device=device, scale=0.02)
    y, _ = norm_linear_triton(x, res, nw, 1e-5, w)
    assert _rel_err(y, norm_linear_ref(x, res, nw, 1e-5, w)[0]) < BOUND[dt]
    gu = randn(gen, m, 2 * n, dtype=dt, device=device)
    wd = randn(gen, k, n, dtype=dt, device=device, scale=0.02)
    assert _rel_err(silu_linear_triton(gu, wd), silu_linear_ref(gu, wd)) < BOUND[dt]


@pytest.mark.parametrize("call,arg", [
    (lambda d: norm_linear_triton(torch.ones(33, 8, device=d), None, torch.ones(8, device=d), 1e-6,
                                  torch.ones(4, 8, device=d)), "'x'"),
    (lambda d: norm_linear_triton(torch.ones(2, 8, device=d), None, torch.ones(8, device=d), 1e-6,
                                  torch.ones(4, 9, device=d)), "'x'"),
    (lambda d: norm_linear_triton(torch.ones(2, 8, device=d), torch.ones(3, 8, device=d), torch.ones(8, device=d),
                                  1e-6, torch.ones(4, 8, device=d)), "'residual'"),
    (lambda d: norm_linear_triton(torch.ones(2, 8, device=d), None, torch.ones(7, device=d), 1e-6,
                                  torch.ones(4, 8, device=d)), "'norm_w'"),
    (lambda d: silu_linear_triton(torch.ones(2, 8, device=d), torch.ones(8, 4, device=d).t()), "'w'"),
    (lambda d: silu_linear_triton(torch.ones(2, 9, device=d), torch.ones(4, 4, device=d)), "'gate_up'"),
    (lambda d: silu_linear_triton(torch.ones(2, 8, device=d), torch.ones(4, 4, device=d, dtype=torch.bfloat16)),
     "'w'"),
])
def test_bad_input_names_the_argument(device, call, arg):
    with pytest.raises(KernelInputError, match=arg):
        call(device)


def test_ops_dispatch(device, gen):
    """ops picks the kernel for decode-sized batches and the reference past 32 rows; both agree."""
    k, n = 32, 16
    w = randn(gen, n, k, device=device)
    nw = torch.ones(k, device=device)
    for m in (4, 40):
        x = randn(gen, m, k, device=device)
        y, _ = ops.norm_linear(x, None, nw, 1e-6, w)
        assert _rel_err(y, norm_linear_ref(x, None, nw, 1e-6, w)[0]) < 1e-5
    big = torch.ones(40, k, device=device, dtype=torch.bfloat16)
    assert not ops.gemv_supported(big)
    assert ops.gemv_supported(big[:8]) == (device.type == "cuda")
