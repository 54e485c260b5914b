"""The engine's CPU torch work outside its scheduling thread leaves no OpenMP pool behind
(engine.runtime.cpu_threads): a caller's thread that kept one would slow every decode step."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from engine.runtime.cpu_threads import on_fresh_thread

ROOT = Path(__file__).resolve().parents[2]

# Run in a process of its own: pytest's own thread has long run parallel ops. GNU OpenMP starts a
# thread's pool of (threads - 1) workers at its first parallel region and keeps it while that
# thread lives, so the process's OS thread count shows whether the main thread holds one.
PROBE = textwrap.dedent("""
    import json, os, sys, time
    import torch
    from engine.runtime.llm import LLM, SessionState
    from engine.runtime.cpu_threads import on_fresh_thread
    from engine.runtime.sampling import SamplingParams

    torch.set_num_threads(2)

    def count():
        return len(os.listdir("/proc/self/task"))

    def tasks(settled=None):
        # The workers of an ended thread's pool leave shortly after it: wait for the count to
        # come back to `settled` (at most 10 s), then report it, whatever it is.
        deadline = time.monotonic() + 10
        while settled is not None and count() != settled and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        return count()

    out = {"before": tasks()}
    base = out["before"]
    llm = LLM(sys.argv[1], device="cpu", dtype="float32", kv_dtype="float32", kv_capacity_tokens=4096)
    out["after_load"] = tasks(base)
    # A session large enough that the pool's copies are parallel ops (past torch's grain size).
    c, n = llm.config, 3000
    shape = (c.num_layers, n, c.num_kv_heads, c.head_dim)
    kv = on_fresh_thread(torch.ones, shape)    # made off this thread: filling it is a parallel op too
    llm.import_session("s", SessionState([i % c.vocab_size for i in range(n)], {"k": kv, "v": kv}))
    llm.export_session("s")
    out["after_sessions"] = tasks(base)
    r = llm.generate([5, 6, 7], SamplingParams(max_new_tokens=3, ignore_eos=True))
    out["generated"] = len(r.token_ids)
    llm.stop()
    out["after_stop"] = tasks(base)
    torch.ones(1 << 20).add_(1)          # the control: a parallel op on this thread keeps a pool
    out["after_main_parallel_op"] = tasks(base + 1)
    print(json.dumps(out))
""")


def test_on_fresh_thread_returns_the_result_from_another_thread():
    here = threading.get_ident()
    assert on_fresh_thread(lambda a, b=0: (a + b, threading.get_ident()), 2, b=3)[0] == 5
    assert on_fresh_thread(threading.get_ident) != here


def test_on_fresh_thread_raises_the_callers_exception():
    def bad(x):
        raise KeyError(f"no {x}")
    with pytest.raises(KeyError, match="no thing"):
        on_fresh_thread(bad, "thing")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through /proc (Linux)")
def test_cpu_engine_leaves_no_openmp_pool_on_the_callers_thread(llama_dir):
    done = subprocess.run([sys.executable, "-c", PROBE, str(llama_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["generated"] == 3
    base = out["before"]
    assert out["after_load"] == base, out
    assert out["after_sessions"] == base, out
    assert out["after_stop"] == base, out
    # The count does see a pool: one on the main thread adds its one worker (2 threads).
    assert out["after_main_parallel_op"] == base + 1, out
