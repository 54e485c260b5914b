"""Float32 causal attention of one layer on the CPU: the engine's call against the other ways
torch offers to compute it, side by side in one run.

    .venv/bin/python scripts/bench_cpu_attention.py [--tokens 7400] [--rounds 5] [--json out.json]

Issue 18's CPU prefill target (1.2x transformers) needs an attention faster than the fused
kernel both runners call (docs/perf/reference-model.md: attention is 56% of the prefill). This
measures whether torch itself has one, at the reference model's shape (9 query heads, 3 KV
heads, head dimension 64) over a `--tokens` prompt:

- engine: `scaled_dot_product_attention(is_causal=True, enable_gqa=True)` on the [token, head,
  dim] tensors viewed as [1, head, token, dim], as engine.kernels.reference calls it;
- sdpa-expanded: the same kernel on contiguous tensors with the KV heads repeated;
- flex: `torch.compile(flex_attention)` with a causal block mask (inductor's CPU template);
- blocked-math: query blocks of 1,024 rows, each a batched product over its causal prefix, a
  softmax and a second product: MKL's GEMMs with the score blocks in memory;
- split-lse: query blocks of 1,024 rows, each the fused kernel twice, over its causal diagonal
  block and over its prefix without a mask, merged by the two calls' log-sum-exp;
- balanced-halves: the fused kernel single-threaded in two Python threads at once, each given
  half the causal work. The fused kernel hands each of its threads a contiguous run of (head,
  query block) items, so with an odd head count one thread gets the expensive later rows of the
  middle head; here that head's first n/sqrt(2) rows (half its causal work) go to one side, and
  its later rows, merged from an unmasked and a causal call by their log-sum-exp, to the other.
- balanced-exact: the same two single-threaded sides, with the fused call's bits. The kernel
  computes a row alike in any call whose query blocks line up with the whole call's (blocks of
  256 rows from a prompt of 768 or more, 64 from 192, else 32; keys always in blocks of 512 from
  key 0), and under an additive mask alike as under `is_causal` (both checked by this script's
  test). So the middle head's first rows, a whole number of query blocks near n x 0.732 (where
  the two sides' work meets once the masked call's full rectangle is counted), are one causal
  call on one side, and its later rows one call under a float mask over every key on the other.

Rounds alternate the variants, so drift on a shared machine falls on all of them alike. Each
row gives the median time, the rate in GFLOPS (causal FLOPs: 2 x 2 x n^2 / 2 x dim x heads), the
ratio of the engine's median to the row's (above 1: faster than the engine's call) and the
relative error against the engine's output. A 4096^3 SGEMM gives the machine's float32 rate.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import threading
import time

import torch
import torch.nn.functional as F


def sgemm_gflops() -> float:
    a, b = torch.randn(4096, 4096), torch.randn(4096, 4096)
    a @ b
    times = []
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * 4096**3 / statistics.median(times) / 1e9


def variants(q, k, v, scale: float, block: int):
    """name -> callable returning [heads, tokens, dim]; q [n, Hq, D], k and v [n, Hkv, D]."""
    n, hq, d = q.shape
    g = hq // k.shape[1]
    qv, kv, vv = (t.transpose(0, 1)[None] for t in (q, k, v))
    qc = qv.contiguous()
    kc = kv.repeat_interleave(g, 1).contiguous()
    vc = vv.repeat_interleave(g, 1).contiguous()

    def engine():
        return F.scaled_dot_product_attention(qv, kv, vv, is_causal=True, scale=scale,
                                              enable_gqa=g > 1)[0]

    def expanded():
        return F.scaled_dot_product_attention(qc, kc, vc, is_causal=True, scale=scale)[0]

    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, n, n, device="cpu")
    flex = torch.compile(flex_attention)

    def flexed():
        return flex(qc, kv.contiguous(), vv.contiguous(), block_mask=mask, scale=scale,
                    enable_gqa=g > 1)[0]

    def blocked():
        out = torch.empty(hq, n, d)
        for s in range(0, n, block):
            e = min(n, s + block)
            scores = torch.bmm(qc[0, :, s:e] * scale, kc[0, :, :e].transpose(1, 2))
            diag = torch.ones(e - s, e - s, dtype=torch.bool).triu_(1)
            scores[:, :, s:e].masked_fill_(diag, float("-inf"))
            torch.softmax(scores, -1, out=scores)
            out[:, s:e] = torch.bmm(scores, vc[0, :, :e])
        return out

    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

    def split_lse():
        # Each block of query rows in two calls of the same fused kernel: its causal diagonal
        # block, and its whole prefix without a mask (no masked tiles to skip or waste), the two
        # merged by their log-sum-exp.
        out = torch.empty(1, hq, n, d)
        for s in range(0, n, block):
            e = min(n, s + block)
            od, ld = flash(qv[:, :, s:e], kv[:, :, s:e], vv[:, :, s:e], 0.0, True, scale=scale)[:2]
            if s == 0:
                out[:, :, s:e] = od
                continue
            op, lp = flash(qv[:, :, s:e], kv[:, :, :s], vv[:, :, :s], 0.0, False, scale=scale)[:2]
            out[:, :, s:e] = _lse_merge(op, lp, od, ld)
        return out[0]

    def balanced():
        return balanced_halves(qc, kc, vc, scale)

    plan = exact_plan(n, hq)               # a prefill would build it once for its 30 layers

    def exact():
        return balanced_exact(qc, kc, vc, scale, plan)

    return {"engine": engine, "sdpa-expanded": expanded, "flex": flexed,
            "blocked-math": blocked, "split-lse": split_lse, "balanced-halves": balanced,
            "balanced-exact": exact}


def _lse_merge(a, la, b, lb):
    """Two attention results over disjoint key sets, merged by their log-sum-exp."""
    m = torch.maximum(la, lb)
    wa, wb = (la - m).exp_(), (lb - m).exp_()
    total = wa + wb
    return a * (wa / total)[..., None] + b * (wb / total)[..., None]


def balanced_halves(q, k, v, scale: float):
    """Causal attention of [1, H, n, D] contiguous q, k, v (KV heads repeated) -> [H, n, D], as two
    single-threaded halves of equal causal work running at once (the module's docstring)."""
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    _, h, n, _ = q.shape
    out = torch.empty_like(q)
    half, odd = h // 2, h % 2
    m = round(n / math.sqrt(2))           # rows [0, m) of a head hold half its causal work

    def first():
        out[:, :half] = flash(q[:, :half], k[:, :half], v[:, :half], 0.0, True, scale=scale)[0]
        if odd:
            s = slice(half, half + 1)
            out[:, s, :m] = flash(q[:, s, :m], k[:, s, :m], v[:, s, :m], 0.0, True, scale=scale)[0]

    def second():
        rest = slice(half + odd, h)
        out[:, rest] = flash(q[:, rest], k[:, rest], v[:, rest], 0.0, True, scale=scale)[0]
        if odd:
            s = slice(half, half + 1)
            op, lp = flash(q[:, s, m:], k[:, s, :m], v[:, s, :m], 0.0, False, scale=scale)[:2]
            od, ld = flash(q[:, s, m:], k[:, s, m:], v[:, s, m:], 0.0, True, scale=scale)[:2]
            out[:, s, m:] = _lse_merge(op, lp, od, ld)

    _single_threaded_pair(first, second)
    return out[0]


def q_split(rows: int) -> int:
    """The query block of torch's fused CPU attention for a call of `rows` query rows."""
    return 256 if rows >= 768 else 64 if rows >= 192 else 32


def exact_plan(n: int, heads: int) -> tuple[int, torch.Tensor | None]:
    """Where balanced_exact splits the middle head of an n-token prompt, and the float mask of
    its later rows (None where it stays whole)."""
    block = q_split(n)
    m = min(n, round(n * (math.sqrt(3) - 1) / block) * block)
    # An even head count needs no split; and where the first rows' own call would cut them into
    # other query blocks than the whole call's (or there are none), the middle head stays whole.
    if heads % 2 == 0 or m == 0 or q_split(m) != block:
        return n, None
    return m, torch.zeros(n - m, n).masked_fill_(
        torch.arange(n)[None, :] > torch.arange(m, n)[:, None], float("-inf"))


def balanced_exact(q, k, v, scale: float, plan: tuple[int, torch.Tensor | None]):
    """Causal attention of [1, H, n, D] q and k, v (KV heads repeated) -> [H, n, D], as two
    single-threaded sides of about equal work, bit for bit the fused call's (the module's
    docstring); `plan` is exact_plan(n, H)."""
    _, h, n, _ = q.shape
    out = torch.empty(1, h, n, q.shape[-1], dtype=q.dtype)
    half, odd = h // 2, h % 2
    m, later = plan
    mid = slice(half, half + 1)

    def first():
        out[:, :half] = F.scaled_dot_product_attention(q[:, :half], k[:, :half], v[:, :half],
                                                       is_causal=True, scale=scale)
        if odd:
            out[:, mid, :m] = F.scaled_dot_product_attention(q[:, mid, :m], k[:, mid, :m], v[:, mid, :m],
                                                             is_causal=True, scale=scale)

    def second():
        rest = slice(half + odd, h)
        out[:, rest] = F.scaled_dot_product_attention(q[:, rest], k[:, rest], v[:, rest],
                                                      is_causal=True, scale=scale)
        if later is not None:
            out[:, mid, m:] = F.scaled_dot_product_attention(q[:, mid, m:], k[:, mid], v[:, mid],
                                                             attn_mask=later, scale=scale)

    _single_threaded_pair(first, second)
    return out[0]


def _single_threaded_pair(first, second) -> None:
    """first() here and second() in a worker thread at once, torch on one thread each (the fused
    kernel releases the GIL); torch's thread count is restored and the worker's error raised."""
    failed: list[BaseException] = []

    def second_caught():
        try:
            second()
        except BaseException as exc:  # re-raised below: a thread's error would otherwise only print
            failed.append(exc)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        worker = threading.Thread(target=second_caught)
        worker.start()
        try:
            first()
        finally:
            worker.join()
    finally:
        torch.set_num_threads(threads)
    if failed:
        raise failed[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=7400)
    ap.add_argument("--heads", type=int, default=9)
    ap.add_argument("--kv-heads", type=int, default=3)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--block", type=int, default=1024, help="query rows per blocked-math and split-lse step")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the figures here as well")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(0)
    n, hq, hkv, d = a.tokens, a.heads, a.kv_heads, a.head_dim
    q = torch.randn(n, hq, d, generator=gen)
    k, v = torch.randn(n, hkv, d, generator=gen), torch.randn(n, hkv, d, generator=gen)
    rate = sgemm_gflops()
    fns = variants(q, k, v, d ** -0.5, a.block)
    want = fns["engine"]()
    errors, times = {}, {name: [] for name in fns}
    for name, fn in fns.items():                  # warm-up; compiles flex once, outside the rounds
        got = fn()
        errors[name] = float((got - want).double().norm() / want.double().norm())
    for _ in range(a.rounds):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    flop = 2 * 2 * n * n / 2 * d * hq
    base = statistics.median(times["engine"])
    rows = []
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{a.threads} threads, {n} tokens, {hq}/{hkv} heads, dim {d}; SGEMM {rate:.0f} GFLOPS")
    print(f"{'variant':14s} {'median ms':>10s} {'GFLOPS':>7s} {'of SGEMM':>8s} {'vs engine':>9s} "
          f"{'rel err':>8s}")
    for name in fns:
        med = statistics.median(times[name])
        row = {"variant": name, "median_s": med, "gflops": flop / med / 1e9,
               "of_sgemm": flop / med / 1e9 / rate, "speedup_vs_engine": base / med,
               "rel_err": errors[name], "times_s": times[name]}
        rows.append(row)
        print(f"{name:14s} {med * 1e3:10.1f} {row['gflops']:7.1f} {row['of_sgemm']:8.2f} "
              f"{row['speedup_vs_engine']:9.2f} {row['rel_err']:8.1e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tokens": n, "heads": hq, "kv_heads": hkv, "head_dim": d,
                       "threads": a.threads, "torch": torch.__version__,
                       "sgemm_gflops": rate, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
