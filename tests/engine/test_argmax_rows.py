"""Two-stage greedy argmax (engine.runtime.sampling.argmax_rows) returns what torch.argmax returns."""
from __future__ import annotations

import pytest
import torch

from engine.runtime.sampling import _argmax_chunks, argmax_rows


@pytest.mark.parametrize("chunks", [None, 4, 96, 1002])
def test_equals_torch_argmax_with_ties_and_nan(device, chunks):
    g = torch.Generator().manual_seed(11)
    v = 128256
    x = torch.randn(6, v, generator=g)
    x[1, 70000] = x[1, 5] = x[1].max() + 1          # a tie across chunks: the first index wins
    x[2] = 0.0                                       # all equal: index 0
    x[3, 1000:1128] = 7.0                            # a tie inside one chunk
    x[4, 90000] = float("nan")                       # NaN counts as the max
    x[5, v - 1] = 1e9                                # the very last element
    x = x.to(device)
    want = torch.argmax(x, dim=-1)
    got = argmax_rows(x, chunks)
    assert got.dtype == torch.int64 and got.shape == (6,)
    assert torch.equal(got, want)
    assert got.tolist()[1:] == [5, 0, 1000, 90000, v - 1]


def test_chunk_count():
    assert _argmax_chunks(128256) == 1002 and 128256 % 1002 == 0
    assert _argmax_chunks(151936) * 128 <= 151936
    assert _argmax_chunks(320) == 1 and _argmax_chunks(127) == 1   # too small to split
    assert _argmax_chunks(131071) == 1                               # prime: nothing divides it
