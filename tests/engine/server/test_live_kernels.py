"""The server's --kernels option and ENGINE_KERNELS_ARTIFACT on the CPU: the artifact is checked and
named in /v1/engine/status; a bad one refuses the start, naming the file. (No kernel compiles on
the CPU: tests/engine/test_aot_kernels_gpu.py checks the hits on a GPU.)"""
import hashlib
import os
import subprocess
import sys

import pytest

from tests.engine.server.live import Server, base_profile

pytest.importorskip("triton")


def empty_artifact(path):
    from engine.kernels.aot_build import INDEX, write_tar
    index = b'{"archs": [], "entries": [], "env": {}, "format": 1, "triton": "3.6.0"}\n'
    write_tar(path, {INDEX: index}, 1_700_000_000)
    return path


@pytest.mark.skipif(os.environ.get("ASSAY_ENGINE_TEST_DEVICE", "cpu") != "cpu", reason="CPU expectations")
def test_status_names_the_kernels_artifact(tiny_model, tmp_path):
    art = empty_artifact(tmp_path / "k.tar")
    with Server(tmp_path / "srv", base_profile(tiny_model), extra_args=("--kernels", str(art))) as s, s.client() as c:
        assert c.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2}).status_code == 200
        k = c.get("/v1/engine/status").json()["kernels"]
    assert k == {"source": "none", "artifact_sha256": hashlib.sha256(art.read_bytes()).hexdigest(), "arch": None,
                 "aot_hits": 0, "jit_compiles": 0, "per_kernel": {}}


def test_a_bad_artifact_refuses_the_start(tiny_model, tmp_path):
    bad = tmp_path / "bad-kernels.tar"
    bad.write_bytes(b"not a tar")
    s = Server(tmp_path / "srv", base_profile(tiny_model))
    env = {**os.environ, "ENGINE_KERNELS_ARTIFACT": str(bad)}
    proc = subprocess.run(s.argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"kernels artifact {bad}: cannot be read" in proc.stderr
    assert "Traceback" not in proc.stderr
