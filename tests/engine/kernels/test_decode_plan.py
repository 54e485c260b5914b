"""The CPU decode step's plan (engine.kernels.decode_plan): built once per step, reused only while
the block tables and lengths hold the same values, and the attention it drives stays exact."""

from __future__ import annotations

import torch

from engine.kernels import decode_plan as dp
from engine.kernels.reference import paged_decode_attention_ref
from tests.engine.kernels.test_decode_cpu_batched import _dense
from tests.engine.kernels.paged_inputs import build, randn


def test_a_plan_is_reused_for_equal_values_and_rebuilt_for_new_ones():
    tables = torch.tensor([[3, 4, 5, -1]], dtype=torch.int32)
    lens = torch.tensor([40], dtype=torch.int32)
    first = dp.decode_plan(tables, lens, 16)
    assert first.lens == [40] and first.spans[0].row0 == 48 and first.spans[0].blocks is None
    # Equal values in other tensors (the next layer, or the next step of the same batch): reused.
    assert dp.decode_plan(tables.clone(), lens.clone(), 16) is first
    # The same tensor edited in place: the plan follows the new values.
    tables[0, 1] = 9
    moved = dp.decode_plan(tables, lens, 16)
    assert moved is not first and moved.spans[0].row0 is None
    assert moved.spans[0].blocks.tolist() == [3, 9, 5]
    lens[0] = 20                                       # two blocks now
    assert dp.decode_plan(tables, lens, 16).spans[0].blocks.tolist() == [3, 9]
    assert dp.decode_plan(tables, lens, 8).spans[0].blocks.tolist() == [3, 9, 5]   # another block size
    empty = dp.decode_plan(tables, torch.tensor([0], dtype=torch.int32), 16)
    assert empty.spans == [None] and empty.lens == [0]


def test_consecutive_blocks_are_read_in_place_and_scattered_ones_gathered():
    cache = torch.randn(10, 4, 2, 8)
    span = dp.Span(n=7, row0=12, blocks=None)          # blocks 3 and 4, tokens 12..18
    view = dp.span_heads(cache, None, span)
    assert view.shape == (1, 2, 7, 8) and view.data_ptr() == cache[3, 0, 0].data_ptr()
    assert torch.equal(view[0], cache.view(-1, 2, 8)[12:19].transpose(0, 1))
    gathered = dp.span_heads(cache, None, dp.Span(n=7, row0=None, blocks=torch.tensor([6, 1])))
    assert torch.equal(gathered[0], torch.cat([cache[6], cache[1]])[:7].transpose(0, 1))
    scale = torch.rand(10, 4, 2)
    scaled = dp.span_heads(cache, scale, span)         # never a view when scales apply
    assert torch.equal(scaled[0], (cache * scale[..., None]).view(-1, 2, 8)[12:19].transpose(0, 1))


def test_decode_with_reused_plans_stays_exact_across_layers_and_steps():
    """Two "layers" (caches) read through one plan, then the table edited in place between steps:
    every result equals plain float64 attention over what the table says at that moment."""
    gen = torch.Generator().manual_seed(7)
    layers = [build(gen, [37], num_kv_heads=2, head_dim=16, spare_blocks=4) for _ in range(2)]
    tables, lens = layers[0].block_tables.clone(), layers[0].seq_lens.clone()
    q = randn(gen, 1, 4, 16)
    for step in range(2):
        for p in layers:
            p.block_tables, p.seq_lens = tables, lens
            got = paged_decode_attention_ref(q, *p.cache_args(), tables, lens, 0.25)
            torch.testing.assert_close(got.double(), _dense(q, p, lens.tolist(), 0.25), rtol=1e-5, atol=1e-5)
        tables[0, 0] = tables[0, 1]                    # a different (garbage) block from now on
        tables[0, 1] = int(layers[0].k_cache.shape[0]) - 1
