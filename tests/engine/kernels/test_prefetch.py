"""L2 prefetch kernel: it reads exactly the bytes asked for (each program's OR of its words is
its proof of reading them) and changes nothing."""

from __future__ import annotations

import pytest
import torch

from engine.kernels import ops
from engine.kernels.errors import KernelInputError
from engine.kernels.triton_prefetch import BLOCK, prefetch_l2_triton


def _or_per_block(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    words = t.view(-1).view(torch.uint8)[: nbytes // 4 * 4].view(torch.int32).long()
    out = []
    for i in range(0, words.numel(), BLOCK):
        acc = 0
        for w in words[i:i + BLOCK].tolist():
            acc |= w & 0xFFFFFFFF
        out.append(acc - (1 << 32) if acc >= 1 << 31 else acc)
    return torch.tensor(out, dtype=torch.int32)


@pytest.mark.parametrize("nbytes", [None, 4, 3 * BLOCK * 4 + 100, 10**9])
def test_reads_the_bytes_asked_for_and_changes_nothing(device, gen, nbytes):
    t = torch.randn(5 * BLOCK + 7, generator=gen).to(device=device, dtype=torch.bfloat16)
    # Sparse bit patterns, so that an OR over the wrong words gives a different answer.
    t.view(torch.int16).bitwise_and_(torch.randint(0, 1 << 15, t.shape, generator=gen, dtype=torch.int16)
                                     .to(device).bitwise_and_(0x0101))
    before = t.clone()
    sink = prefetch_l2_triton(t, nbytes)
    total = t.numel() * 2
    want = _or_per_block(t.cpu(), total if nbytes is None else min(nbytes, total))
    assert torch.equal(sink.cpu(), want)
    assert torch.equal(t, before)


def test_zero_bytes_launches_nothing(device):
    t = torch.ones(16, device=device)
    assert prefetch_l2_triton(t, 0).numel() == 1
    assert prefetch_l2_triton(t, 3).numel() == 1          # under one word: nothing to read


@pytest.mark.parametrize("bad,arg", [(lambda d: (torch.ones(8, 8, device=d).t(), None), "'t'"),
                                     (lambda d: (torch.ones(8, device=d), -1), "'nbytes'"),
                                     (lambda d: ([1, 2], None), "'t'")])
def test_bad_input_names_the_argument(device, bad, arg):
    with pytest.raises(KernelInputError, match=arg):
        prefetch_l2_triton(*bad(device))


def test_ops_prefetch_is_a_no_op_off_cuda():
    t = torch.ones(4096)
    assert ops.prefetch_l2(t) is None and torch.equal(t, torch.ones(4096))
