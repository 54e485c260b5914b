"""The model's elementwise pieces (engine.model.fused): the CPU's one-call RMSNorm in float32 is
bit-identical to transformers' order of operations, which the other dtypes still run."""

from __future__ import annotations

import pytest
import torch

from engine.model import fused


def _transformers_rms_norm(x, weight, eps):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


@pytest.mark.parametrize("dim", [64, 576, 2048])
def test_cpu_float32_rms_norm_is_bit_identical(dim):
    gen = torch.Generator().manual_seed(dim)
    for rows in (1, 3, 17):
        for scale in (1e-3, 1.0, 1e3):
            x = torch.randn(rows, dim, generator=gen) * scale
            w = torch.randn(dim, generator=gen)
            assert torch.equal(fused.rms_norm(x, w, 1e-5), _transformers_rms_norm(x, w, 1e-5))
            h, res = fused.add_rms_norm(x, x * 0.5, w, 1e-6)
            assert torch.equal(res, x * 0.5 + x) and torch.equal(h, _transformers_rms_norm(res, w, 1e-6))


def test_bf16_keeps_transformers_order():
    """bf16 casts back before the weight: not what a one-call RMSNorm does, so it keeps the lines."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 576, generator=gen).bfloat16()
    w = torch.randn(576, generator=gen).bfloat16()
    assert torch.equal(fused.rms_norm(x, w, 1e-5), _transformers_rms_norm(x, w, 1e-5))


def test_compiled_ops_serve_cuda_inputs_only():
    """Once a CUDA model compiles the ops (process-wide), a CPU model in the same process keeps the
    eager ones: sent to the compiled code, each device and rank recompiled it until Dynamo's
    limit, a hard error under fullgraph=True (seen on the GPU with the tiny models' tests)."""
    calls = []

    def compiled(x, *args):
        calls.append(x.device.type)
        return "compiled"

    op = fused._cuda_only(compiled, fused._EAGER["rms_norm"])
    x, w = torch.randn(3, 8), torch.ones(8)
    assert torch.equal(op(x, w, 1e-6), _transformers_rms_norm(x, w, 1e-6))
    assert calls == []
    if torch.cuda.is_available():
        assert op(x.cuda(), w.cuda(), 1e-6) == "compiled" and calls == ["cuda"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled ops serve CUDA inputs only")
def test_compiled_ops_take_every_dtype_and_rank_in_one_process():
    """Models of several dtypes in one process: each compiled op sees 3 dtypes x 2 ranks x one row
    or several, 12 variants, past Dynamo's default limit of 8, where fullgraph=True fails hard
    (what the GPU tests hit once a bf16 tiny model ran before the float32 ones)."""
    assert fused.enable_compile()
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for shape in ((1, 64), (5, 64), (1, 4, 64), (5, 4, 64)):
            x = torch.randn(*shape, device="cuda", dtype=dtype)
            w = torch.rand(64, device="cuda", dtype=dtype) + 0.5
            tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
            torch.testing.assert_close(fused.rms_norm(x, w, 1e-6), fused._EAGER["rms_norm"](x, w, 1e-6), **tol)
            got, summed = fused.add_rms_norm(x, x, w, 1e-6)
            want, want_sum = fused._EAGER["add_rms_norm"](x, x, w, 1e-6)
            torch.testing.assert_close(got, want, **tol)
            torch.testing.assert_close(summed, want_sum, rtol=0, atol=0)
            torch.testing.assert_close(fused.silu_mul(x, 32), fused._EAGER["silu_mul"](x, 32), **tol)
    assert torch._dynamo.config.recompile_limit >= fused.RECOMPILE_LIMIT


class _OnCuda:
    """Stands for a CUDA tensor where the routing alone is under test (no GPU on the CI machine)."""
    is_cuda = True


def test_eager_ops_route_cuda_inputs_on_this_thread_only():
    """Inside eager_ops(True) a CUDA input takes the eager op; outside, and on any other thread
    meanwhile, the compiled one; the setting nests and is restored on the way out of an error."""
    import threading

    op = fused._cuda_only(lambda x, *a: "compiled", lambda x, *a: "eager")
    assert op(_OnCuda()) == "compiled"
    seen = []
    with fused.eager_ops(True):
        assert op(_OnCuda()) == "eager"
        t = threading.Thread(target=lambda: seen.append(op(_OnCuda())))
        t.start()
        t.join()
        with fused.eager_ops(False):
            assert op(_OnCuda()) == "compiled"
        assert op(_OnCuda()) == "eager"
    assert seen == ["compiled"] and op(_OnCuda()) == "compiled"
    with pytest.raises(RuntimeError, match="boom"):
        with fused.eager_ops(True):
            raise RuntimeError("boom")
    assert op(_OnCuda()) == "compiled"


def test_prefer_eager_only_for_short_prefill_passes_on_cuda(monkeypatch):
    monkeypatch.setattr(fused, "_compiled", True)
    short, long_ = fused.EAGER_PREFILL_ROWS - 1, fused.EAGER_PREFILL_ROWS
    assert fused.prefer_eager(1, decode=False, on_cuda=True)
    assert fused.prefer_eager(short, decode=False, on_cuda=True)
    assert not fused.prefer_eager(long_, decode=False, on_cuda=True)      # GPU-bound: the fused kernels
    assert not fused.prefer_eager(8, decode=True, on_cuda=True)           # decode: CUDA graphs hide the wrappers
    assert not fused.prefer_eager(8, decode=False, on_cuda=False)
    monkeypatch.setattr(fused, "_compiled", False)
    assert not fused.prefer_eager(8, decode=False, on_cuda=True)          # nothing compiled to avoid


def test_transformer_asks_per_pass(tiny_dir, monkeypatch):
    """The model's forward decides once a pass, from its row count and whether it decodes."""
    from engine.runtime.llm import LLM
    from engine.runtime.sampling import SamplingParams

    asked = []
    real = fused.prefer_eager
    monkeypatch.setattr(fused, "prefer_eager", lambda rows, decode, on_cuda: asked.append((rows, decode, on_cuda))
                        or real(rows, decode, on_cuda))
    llm = LLM(str(tiny_dir), device="cpu", max_model_len=128, kv_capacity_tokens=256, prefill_chunk=16,
              max_concurrency=1, cuda_graphs=False)
    llm.runner.cpu_decode = None           # decode through the model's forward, not the CPU's flat loop
    try:
        llm.generate(list(range(3, 23)), SamplingParams(max_new_tokens=2, ignore_eos=True))
    finally:
        llm.stop()
    assert asked[:2] == [(16, False, False), (4, False, False)]      # two prefill chunks
    assert (1, True, False) in asked[2:]                              # then a decode step
