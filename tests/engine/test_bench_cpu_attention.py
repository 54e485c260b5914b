"""scripts/bench_cpu_attention.py: every variant computes the same causal GQA attention as a
naive reference, and the run's table and JSON compare them against the engine's call."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.script_module import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_cpu_attention.py"


def naive(q, k, v, scale):
    """Causal attention, one head at a time, from the definition; q [n, Hq, D], kv [n, Hkv, D]."""
    n, hq, _ = q.shape
    g = hq // k.shape[1]
    out = []
    for h in range(hq):
        s = (q[:, h].double() @ k[:, h // g].double().T) * scale
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        out.append(torch.softmax(s, -1) @ v[:, h // g].double())
    return torch.stack(out)                                         # [Hq, n, D]


def test_every_variant_is_causal_gqa_attention(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))   # flex compiles; keep it here
    gen = torch.Generator().manual_seed(3)
    n, hq, hkv, d = 150, 6, 2, 16
    q = torch.randn(n, hq, d, generator=gen)
    k, v = torch.randn(n, hkv, d, generator=gen), torch.randn(n, hkv, d, generator=gen)
    want = naive(q, k, v, 0.25)
    # blocks of 64 rows: two full ones and a ragged last one, each with its diagonal masked
    fns = load_script(SCRIPT).variants(q, k, v, 0.25, block=64)
    assert sorted(fns) == ["balanced-exact", "balanced-halves", "blocked-math", "engine", "flex",
                           "sdpa-expanded", "split-lse"]
    for name, fn in fns.items():
        got = fn().double()
        assert got.shape == (hq, n, d), name
        err = float((got - want).norm() / want.norm())
        assert err < 1e-5, (name, err)


def test_balanced_halves_splits_an_odd_head_count_exactly():
    """With an odd head count the middle head is split by rows between the two halves."""
    gen = torch.Generator().manual_seed(5)
    n, hq, d = 141, 9, 16
    q, k, v = (torch.randn(1, hq, n, d, generator=gen) for _ in range(3))
    threads = torch.get_num_threads()
    got = load_script(SCRIPT).balanced_halves(q, k, v, 0.25).double()
    assert torch.get_num_threads() == threads                     # restored after the halves ran
    want = naive(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1), 0.25)
    assert got.shape == (hq, n, d)
    assert float((got - want).norm() / want.norm()) < 1e-5


@pytest.mark.parametrize("n, first_rows", [(20, 20), (141, 96), (300, 192), (800, 800), (1100, 768)])
def test_balanced_exact_gives_the_fused_calls_bits(n, first_rows, monkeypatch):
    """Every query-block size of torch's kernel (32, 64 and 256 rows); at 800 rows the split
    would fall at 512, where the first rows' own call takes 64-row blocks, and at 20 rows at 0,
    so the middle head stays whole on one side."""
    script = load_script(SCRIPT)
    calls = []
    real = script.F.scaled_dot_product_attention

    def spy(q, *args, **kwargs):
        calls.append((q.shape[1], q.shape[2], "attn_mask" in kwargs))
        return real(q, *args, **kwargs)

    monkeypatch.setattr(script.F, "scaled_dot_product_attention", spy)
    gen = torch.Generator().manual_seed(7)
    hq, hkv, d = 9, 3, 16
    q = torch.randn(n, hq, d, generator=gen)
    k, v = torch.randn(n, hkv, d, generator=gen), torch.randn(n, hkv, d, generator=gen)
    fns = script.variants(q, k, v, 0.25, block=64)
    want = fns["engine"]()
    calls.clear()
    got = fns["balanced-exact"]()
    assert torch.equal(got, want)
    middle = sorted((c for c in calls if c[0] == 1), key=lambda c: c[2])   # causal first
    if first_rows < n:
        assert middle == [(1, first_rows, False), (1, n - first_rows, True)]
    else:
        assert middle == [(1, n, False)]
    assert float((got.double() - naive(q, k, v, 0.25)).norm()) < 1e-4 * float(want.norm())


def test_balanced_halves_raises_what_fails_in_its_worker_thread(monkeypatch):
    script = load_script(SCRIPT)

    def broken(*args):
        raise RuntimeError("merge failed")

    monkeypatch.setattr(script, "_lse_merge", broken)    # only the worker's half merges
    q = torch.randn(1, 3, 40, 16)
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="merge failed"):
        script.balanced_halves(q, q, q, 0.25)
    assert torch.get_num_threads() == threads


def test_a_run_reports_each_variant_against_the_engine(tmp_path):
    out = tmp_path / "attention.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--tokens", "128", "--rounds", "2",
                          "--block", "48", "--json", str(out)], capture_output=True, text=True,
                         timeout=600, cwd=REPO,
                         env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads(out.read_text())
    assert (r["tokens"], r["heads"], r["kv_heads"], r["head_dim"]) == (128, 9, 3, 64)
    rows = {row["variant"]: row for row in r["rows"]}
    assert list(rows) == ["engine", "sdpa-expanded", "flex", "blocked-math", "split-lse", "balanced-halves",
                          "balanced-exact"]
    assert rows["balanced-exact"]["rel_err"] == 0.0
    assert rows["engine"]["speedup_vs_engine"] == 1.0 and rows["engine"]["rel_err"] == 0.0
    for row in rows.values():
        assert len(row["times_s"]) == 2 and row["median_s"] > 0 and row["rel_err"] < 1e-5
        assert row["gflops"] == 2 * 2 * 128 * 128 / 2 * 64 * 9 / row["median_s"] / 1e9
    assert r["sgemm_gflops"] > 0
    assert "blocked-math" in run.stdout and "SGEMM" in run.stdout
