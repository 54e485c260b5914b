"""Column-major projection weights (engine.model.layout) change strides and nothing the model computes."""
from __future__ import annotations

import torch

from engine.model.layout import (is_column_major, keep_row_major_copies, multi_row_copies_pay,
                                 set_projection_layout)
from engine.model.projection import MULTI_ROW_MAX, Projection
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams


def _tokens(llm, prompts):
    params = SamplingParams(max_new_tokens=16, ignore_eos=True)
    with llm:
        return [llm.generate(p, params).token_ids for p in prompts]


def test_same_tokens_and_shapes_in_either_layout(tiny_dir, device):
    # Eager decode: a CUDA graph keeps the weight tensors it was captured with, so a layout
    # change after capture would leave it reading freed memory (see engine.model.layout).
    llm = LLM(tiny_dir, device=device, dtype="float32", kv_capacity_tokens=1024, max_concurrency=2,
              cuda_graphs=False)
    model = llm.model
    prompts = [[1, 2, 3, 4, 5], list(range(10, 40))]
    # The CPU lays out every projection but the down projections column-major, the lm_head too,
    # and gives each a row-major weight for products of several rows: the weight itself where it
    # is row-major, else a copy, which a tied embedding reads.
    separate_head = torch.device(device).type == "cpu"
    if separate_head and not multi_row_copies_pay():
        assert all(m.rows is None for m in model.modules() if isinstance(m, Projection))
        keep_row_major_copies(model)      # what a CPU where they pay gets at load
    if separate_head:
        assert is_column_major(model.layers[0].attn.qkv.weight) and is_column_major(model.lm_head.weight)
        for layer in model.layers:
            down = layer.mlp.down
            assert down.weight.is_contiguous() and not is_column_major(down.weight)
            assert down.rows.data_ptr() == down.weight.data_ptr()      # no copy
            for m in (layer.mlp.gate_up, layer.attn.qkv, layer.attn.o):
                assert is_column_major(m.weight)
                assert m.rows.is_contiguous() and torch.equal(m.rows, m.weight)
        rows = model.lm_head.rows
        assert rows.is_contiguous() and torch.equal(rows, model.lm_head.weight)
        assert model.embed.weight.data_ptr() == rows.data_ptr() or not model.cfg.tie_word_embeddings
    else:
        assert all(m.rows is None for m in model.modules() if isinstance(m, Projection))
    set_projection_layout(model, column_major=False, tied=True)
    qkv = model.layers[0].attn.qkv.weight
    assert qkv.is_contiguous() and not is_column_major(qkv)
    row = _tokens(llm, prompts)
    x = torch.randn(3, qkv.shape[1], device=qkv.device)
    y_row = torch.nn.functional.linear(x, qkv)

    set_projection_layout(model, column_major=True)
    qkv = model.layers[0].attn.qkv.weight
    assert is_column_major(qkv) and tuple(qkv.shape) == tuple(y_row.shape[1:]) + (x.shape[1],)
    assert all(is_column_major(m.weight) for m in (model.layers[-1].mlp.down, model.layers[0].attn.o))
    if model.cfg.tie_word_embeddings and not separate_head:   # the embedding's rows are looked up: left alone
        assert model.lm_head.weight is model.embed.weight and model.embed.weight.is_contiguous()
    else:
        assert is_column_major(model.lm_head.weight)
    torch.testing.assert_close(torch.nn.functional.linear(x, qkv), y_row, rtol=1e-5, atol=1e-5)
    assert _tokens(llm, prompts) == row

    set_projection_layout(model, column_major=True)              # idempotent: no copy
    assert model.layers[0].attn.qkv.weight.data_ptr() == qkv.data_ptr()

    set_projection_layout(model, column_major=True, tied=True)   # the CPU's layout: lm_head too
    assert is_column_major(model.lm_head.weight)
    if model.cfg.tie_word_embeddings and not separate_head:   # still one matrix, its rows now read strided
        assert model.lm_head.weight is model.embed.weight
    assert _tokens(llm, prompts) == row


def test_products_of_several_rows_over_the_row_major_weights_match_the_one_row_layouts(tiny_dir):
    """The CPU's row-major weights serve products of 2..MULTI_ROW_MAX rows (a batched step) and
    any number of logit rows; they compute what the one-row layouts compute, and so do a
    batch's greedy tokens."""
    llm = LLM(tiny_dir, device="cpu", dtype="float32", kv_capacity_tokens=1024, max_concurrency=4)
    model = llm.model
    if not multi_row_copies_pay():        # this CPU's loader kept none: make them as one that pays
        keep_row_major_copies(model)
    layer = model.layers[0]
    for m in (layer.attn.qkv, layer.attn.o, layer.mlp.gate_up, layer.mlp.down, model.lm_head):
        assert m.rows is not None
        x = torch.randn(4, m.in_features)
        torch.testing.assert_close(m(x), torch.nn.functional.linear(x, m.weight, m.bias),
                                   rtol=1e-5, atol=1e-5)
    prompts = [[1, 2, 3, 4, 5], list(range(10, 40)), [7] * 12, list(range(60, 70))]
    batched = _tokens(llm, prompts)
    kept = {m: m.rows for m in model.modules() if isinstance(m, Projection)}
    for m in kept:
        m.rows = None
    assert _tokens(llm, prompts) == batched
    assert len({len(t) for t in batched}) == 1 and len(batched[0]) == 16


def test_which_row_counts_read_the_row_major_weight(tiny_dir):
    """One row and more than rows_max rows use nn.Linear's product; 2..rows_max read ``rows``
    (made zero here, so the product shows which one ran); the lm_head reads it for any count."""
    llm = LLM(tiny_dir, device="cpu", dtype="float32", kv_capacity_tokens=256, max_concurrency=1)
    model = llm.model
    if not multi_row_copies_pay():
        keep_row_major_copies(model)
    qkv, head = model.layers[0].attn.qkv, model.lm_head
    qkv.rows, head.rows = torch.zeros_like(qkv.rows), torch.zeros_like(head.rows)
    for n, zero in ((1, False), (2, True), (MULTI_ROW_MAX, True), (MULTI_ROW_MAX + 1, False)):
        y = qkv(torch.randn(n, qkv.in_features))
        assert y.shape == (n, qkv.out_features) and y.is_contiguous()
        assert bool((y == 0).all()) is zero, n
    assert bool((head(torch.randn(1, head.in_features)) == 0).all()) is False
    assert bool((head(torch.randn(MULTI_ROW_MAX + 1, head.in_features)) == 0).all()) is True


def test_named_layers_stay_row_major(tiny_dir):
    """row_major names layers by the last dotted parts of their qualified name; the rest go
    column-major."""
    llm = LLM(tiny_dir, device="cpu", dtype="float32", kv_capacity_tokens=256, max_concurrency=1)
    model = llm.model
    set_projection_layout(model, column_major=True, row_major=("attn.o", "mlp.down"))
    for layer in model.layers:
        assert layer.attn.o.weight.is_contiguous() and layer.mlp.down.weight.is_contiguous()
        assert is_column_major(layer.attn.qkv.weight) and is_column_major(layer.mlp.gate_up.weight)
    set_projection_layout(model, column_major=True, row_major=("lp.down",))   # whole names only
    assert all(is_column_major(layer.mlp.down.weight) for layer in model.layers)


def test_row_major_copies_are_kept_except_on_intel_cpus():
    """A fixed rule by vendor (measured both ways, engine.model.layout.multi_row_copies_pay)."""
    assert multi_row_copies_pay("GenuineIntel") is False
    assert multi_row_copies_pay("AuthenticAMD") is True
    assert multi_row_copies_pay("") is True          # unknown: as before the rule


def test_the_loader_follows_the_rule(tiny_dir, monkeypatch):
    import engine.model.weights as weights
    for pays in (False, True):
        monkeypatch.setattr(weights, "multi_row_copies_pay", lambda pays=pays: pays)
        llm = LLM(tiny_dir, device="cpu", dtype="float32", kv_capacity_tokens=256, max_concurrency=1)
        kept = [m.rows is not None for m in llm.model.modules() if isinstance(m, Projection)]
        assert kept and set(kept) == {pays}
