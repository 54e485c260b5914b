"""The CPU's flat decode loop (engine.runtime.cpu_decode) against the model's module path: the
same logits and the same KV writes, bit for bit, on every decode-path shape the engine runs."""
from __future__ import annotations

import torch

from engine.model.layout import keep_row_major_copies, set_projection_layout
from engine.runtime.cpu_decode import CpuDecode
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams
from engine.runtime.sequence import Sequence


def _llm(model_dir, **kw) -> LLM:
    return LLM(model_dir, device="cpu", dtype="float32", kv_capacity_tokens=1024, max_concurrency=4, **kw)


def _prefilled(llm: LLM, prompts: list[list[int]]) -> list[Sequence]:
    """Sequences holding KV for every prompt token but the last, which a decode step feeds."""
    seqs = []
    for ids in prompts:
        seq = Sequence(ids, SamplingParams(max_new_tokens=8, ignore_eos=True), None, 4)
        assert llm.scheduler._reserve(seq)
        llm.runner.run_window(seq, ids[:-1], all_logits=False)
        seq.kv_len = len(ids) - 1
        seqs.append(seq)
    return seqs


def _caches(llm: LLM) -> list[torch.Tensor]:
    return [t for c in llm.runner.caches for t in c if t is not None]


def _both(llm: LLM, step):
    """step() through the flat loop, then through the modules from the same caches: (logits of
    each, whether the caches came out equal)."""
    runner = llm.runner
    assert runner.cpu_decode is not None
    before = [t.clone() for t in _caches(llm)]
    flat = step()
    after_flat = [t.clone() for t in _caches(llm)]
    for t, b in zip(_caches(llm), before):
        t.copy_(b)
    loop, runner.cpu_decode = runner.cpu_decode, None
    try:
        modules = step()
    finally:
        runner.cpu_decode = loop
    same_kv = all(torch.equal(a, b) for a, b in zip(after_flat, _caches(llm)))
    return flat, modules, same_kv


def _same(flat, modules) -> bool:
    return flat.shape == modules.shape and torch.equal(flat.contiguous(), modules.contiguous())


PROMPTS = [list(range(3, 40)), [7, 8, 9], list(range(100, 119)), [5] * 50]


def test_batch_one_and_several_match_the_modules(tiny_dir):
    llm = _llm(tiny_dir)
    try:
        seqs = _prefilled(llm, PROMPTS)
        for batch in ([seqs[0]], seqs[:2], seqs):      # one sequence; the padded batch of several
            flat, modules, same_kv = _both(llm, lambda: llm.runner.decode(batch).clone())
            assert _same(flat, modules) and same_kv
            assert flat.shape == (len(batch), llm.config.vocab_size)
        # A verification window: several rows of one sequence, and of two, in one step.
        windows = [(seqs[0], [seqs[0].tokens[-1], 11, 12, 13]), (seqs[2], [seqs[2].tokens[-1], 4])]
        flat, modules, same_kv = _both(llm, lambda: llm.runner.decode_windows(windows)[0].clone())
        assert _same(flat, modules) and same_kv and flat.shape[0] == 6
    finally:
        llm.stop()


def test_row_major_copies_and_relaid_weights_are_followed(llama_dir):
    llm = _llm(llama_dir)
    try:
        seqs = _prefilled(llm, PROMPTS[:3])
        keep_row_major_copies(llm.model)          # several rows then read the copies
        flat, modules, same_kv = _both(llm, lambda: llm.runner.decode(seqs).clone())
        assert _same(flat, modules) and same_kv
        before = llm.runner.decode([seqs[1]]).clone()
        # New Parameters with other strides: the loop reads them, not the ones it first saw.
        set_projection_layout(llm.model, column_major=False, tied=True)
        qkv = llm.model.layers[0].attn.qkv
        qkv.weight.mul_(0.5)
        flat, modules, same_kv = _both(llm, lambda: llm.runner.decode([seqs[1]]).clone())
        assert _same(flat, modules) and same_kv
        assert not torch.equal(flat, before)
    finally:
        llm.stop()


def test_a_bf16_cache_under_float32_compute(qwen3_dir):
    llm = _llm(qwen3_dir, kv_dtype="bfloat16")
    try:
        assert llm.runner.caches[0][0].dtype == torch.bfloat16
        seqs = _prefilled(llm, PROMPTS)
        flat, modules, same_kv = _both(llm, lambda: llm.runner.decode(seqs).clone())
        assert _same(flat, modules) and same_kv
    finally:
        llm.stop()


def test_a_skipped_slot_writes_nothing_there(llama_dir):
    llm = _llm(llama_dir)
    try:
        seqs = _prefilled(llm, PROMPTS[:2])
        runner = llm.runner
        real = runner.decode_inputs

        def skip_first_slot(batch, ahead=False):     # the first row's slot as -1: write_kv skips it
            ids, pos, slots, lens = real(batch, ahead)
            return ids, pos, [-1] + slots[1:], lens
        runner.decode_inputs = skip_first_slot
        try:
            flat, modules, same_kv = _both(llm, lambda: runner.decode(seqs).clone())
        finally:
            runner.decode_inputs = real
        assert _same(flat, modules) and same_kv
    finally:
        llm.stop()


def test_generation_matches_the_module_path(tiny_dir):
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    llm = _llm(tiny_dir)
    try:
        flat = [llm.generate(p, params).token_ids for p in PROMPTS[:2]]
        llm.stop()
        llm.runner.cpu_decode = None
        modules = [llm.generate(p, params).token_ids for p in PROMPTS[:2]]
    finally:
        llm.stop()
    assert flat == modules and all(len(t) == 24 for t in flat)


def test_fits_only_the_reference_ops_over_float_caches(llama_dir):
    llm = _llm(llama_dir)
    llm8 = _llm(llama_dir, kv_dtype="int8")
    try:
        assert CpuDecode.fits(llm.model, llm.ops, llm.runner.caches)
        assert llm8.runner.cpu_decode is None
        assert not CpuDecode.fits(llm.model, type("Ops", (), {"name": "triton"})(), llm.runner.caches)
    finally:
        llm.stop()
        llm8.stop()
