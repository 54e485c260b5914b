"""AOT kernels on a GPU: the shipped cubins are used (status "aot", hits > 0) and give the same
greedy tokens as a just-in-time compile from an empty cache, on the tiny models and on the model
ENGINE_TEST_MODEL names (default: the reference model under .assay/models, when present).

Runs only with ENGINE_TEST_DEVICE=cuda; needs nothing but the engine's own dependencies (torch,
triton): the artifact is built here with `python -m engine.kernels.aot_build` for this GPU's arch,
exactly as the build's kernels step does, and every engine run is a fresh process.

    ENGINE_TEST_DEVICE=cuda python -m pytest -q tests/engine/test_aot_kernels_gpu.py
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("ENGINE_TEST_DEVICE") != "cuda", reason="ENGINE_TEST_DEVICE=cuda only")]
REFERENCE = REPO / ".assay" / "models" / "smollm2-135m-instruct"


def _env(cache: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_") and k != "ENGINE_KERNELS_ARTIFACT"}
    env.update(TRITON_CACHE_DIR=str(cache), PYTHONPATH=str(REPO), **extra)
    return env


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("aot-gpu")
    major, minor = torch.cuda.get_device_capability()
    out = tmp / "assay_engine-kernels.tar"
    res = subprocess.run([sys.executable, "-m", "engine.kernels.aot_build", "--out", str(out),
                          "--source-date-epoch", "1700000000", "--arch", f"{major}{minor}"],
                         env=_env(tmp / "build-cache", TRITON_DISABLE_LINE_INFO="1"), cwd=tmp,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[Path]:
    from engine.model.tiny import make_tiny_model
    base = tmp_path_factory.mktemp("models")
    models = [make_tiny_model(base / "llama", "llama", seed=0), make_tiny_model(base / "qwen3", "qwen3", seed=0)]
    given = os.environ.get("ENGINE_TEST_MODEL") or (str(REFERENCE) if (REFERENCE / "config.json").is_file() else "")
    if given:
        models.append(Path(given))
    return models


def generate(model: Path, cache: Path, dtype: str, kv_dtype: str, kernels: Path | None) -> dict:
    argv = [sys.executable, "-m", "engine", "generate", "--model", str(model), "--prompt-ids", "1,2,3,4,5,6,7,8",
            "--max-new-tokens", "48", "--ignore-eos", "--dtype", dtype, "--kv-dtype", kv_dtype, "--device", "cuda",
            "--json"]
    if kernels is not None:
        argv += ["--kernels", str(kernels)]
    cache.mkdir(parents=True, exist_ok=True)   # a fresh Triton cache per run; its folder is the working directory
    res = subprocess.run(argv, env=_env(cache), cwd=cache.parent, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


# dtype auto is the checkpoint's (float32 for these models); kv_dtype auto the compute dtype.
@pytest.mark.parametrize("dtype,kv_dtype", [("auto", "auto"), ("auto", "int8"), ("bfloat16", "auto"),
                                            ("bfloat16", "int8")])
def test_aot_and_jit_give_the_same_greedy_tokens(artifact, models, tmp_path, dtype, kv_dtype):
    for i, model in enumerate(models):
        jit = generate(model, tmp_path / f"jit-{i}" / "cache", dtype, kv_dtype, None)
        aot = generate(model, tmp_path / f"aot-{i}" / "cache", dtype, kv_dtype, artifact)
        assert jit["kernels"]["source"] == "jit" and jit["kernels"]["aot_hits"] == 0, jit["kernels"]
        assert aot["kernels"]["source"] == "aot", (model.name, aot["kernels"])
        assert aot["kernels"]["aot_hits"] > 0 and aot["kernels"]["jit_compiles"] == 0, aot["kernels"]
        assert aot["kernels"]["artifact_sha256"] and aot["kernels"]["arch"] == jit["kernels"]["arch"]
        assert len(jit["token_ids"]) == 48
        assert aot["token_ids"] == jit["token_ids"], (model.name, dtype, kv_dtype)


def test_server_reports_aot_kernels_in_status(artifact, models, tmp_path):
    model = models[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "keys").write_text("k-one\n")
    (tmp_path / "keys").chmod(0o600)
    profile = {"model": {"path": str(model), "name": "tiny"}, "device": "cuda", "dtype": "bfloat16",
               "kv_dtype": "bfloat16", "max_context": 256, "kv_capacity": 4096, "prefill_chunk": 64,
               "max_concurrency": 4, "max_pending_requests": 16, "pending_timeout_ms": 20000,
               "admission_headroom_mib": 16, "host_memory_mib": 512, "max_request_bytes": 262144,
               "shutdown_timeout_s": 10, "api_key_file": "keys", "request_log": "requests.jsonl"}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--profile", str(tmp_path / "profile.json"),
                             "--host", "127.0.0.1", "--port", str(port), "--kernels", str(artifact)],
                            env=_env(tmp_path / "cache"), cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 600
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()[-3000:]
                assert time.time() < deadline, "server did not start"
                time.sleep(1)
        auth = {"Authorization": "Bearer k-one", "Content-Type": "application/json"}
        body = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 8, "temperature": 0}).encode()
        urllib.request.urlopen(urllib.request.Request(f"{url}/v1/completions", data=body, headers=auth), timeout=120).read()
        status = json.loads(urllib.request.urlopen(urllib.request.Request(f"{url}/v1/engine/status", headers=auth),
                                                   timeout=60).read())
        k = status["kernels"]
        assert k["source"] == "aot" and k["aot_hits"] > 0 and k["jit_compiles"] == 0, k
        assert k["artifact_sha256"] and k["arch"].startswith("sm_")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
