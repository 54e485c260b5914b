"""The AOT registry lists every specialization a decode launch can take on a GPU, whatever the
block table's width, up to the CUDA graphs' 512 (CPU only: tests/engine/aot_coverage_probe.py
runs the launch wrappers on CPU tensors laid out as on the GPU, catches each launch before it
runs, and computes the key Triton's JIT would).

A specialization the registry does not list is compiled just in time, which a lane shows as
"mixed" kernels. On the H200 (2026-12-02) the tiny models' CUDA-graph width, 128 (eight splits
of a float KV cache), was missing: the split buffers' strides fell in a divisibility class no
listed width produced for float KV."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[2]


def test_every_table_width_up_to_512_has_its_decode_specializations_listed(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env.update(PYTHONPATH=str(REPO), TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_HOME=str(tmp_path))
    res = subprocess.run([sys.executable, str(Path(__file__).with_name("aot_coverage_probe.py"))],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["checked"] == 4 * 3 * 3 * 512
    assert out["missing"] == {}, {k: f"{len(v)} widths, e.g. {v[:8]}" for k, v in out["missing"].items()}
