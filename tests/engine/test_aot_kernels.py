"""AOT Triton kernels on the CPU: the artifact is built for real (Triton's compiler and ptxas need no
GPU), is reproducible across source paths and cache directories, and the cache manager serves a
shipped cubin exactly when Triton's own key matches. Cubins cannot run here (TRITON_INTERPRET runs
none); tests/engine/test_aot_kernels_gpu.py runs them on a GPU."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.kernels_subset import SUBSET_MODULE

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000
pytestmark = pytest.mark.slow


def _env(cache: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env.update(TRITON_CACHE_DIR=str(cache), TRITON_HOME=str(cache.parent / "triton-home"), **extra)
    return env


def build_artifact(tmp: Path, out: Path, *, source_parent: Path = REPO, line_info: bool = False) -> subprocess.CompletedProcess:
    cache = tmp / "cache"
    env = _env(cache, **({} if line_info else {"TRITON_DISABLE_LINE_INFO": "1"}))
    env["PYTHONPATH"] = str(source_parent)
    # The registry's first launches only (tests/kernels_subset.py): the whole registry takes over a
    # minute a build here, and tests/builders/test_engine_build.py builds it twice.
    return subprocess.run([sys.executable, "-c", SUBSET_MODULE, "--out", str(out),
                           "--source-date-epoch", str(EPOCH), "--arch", "90"],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("aot-a")
    out = tmp / "assay_engine-0.1.0-kernels.tar"
    res = build_artifact(tmp, out)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def test_artifact_is_a_deterministic_tar_of_cubins_and_metadata(artifact):
    with tarfile.open(artifact) as tf:
        members = tf.getmembers()
        names = [m.name for m in members]
        index = json.load(tf.extractfile("index.json"))
        data = {m.name: tf.extractfile(m).read() for m in members}
    assert names == sorted(names)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(EPOCH, 0, 0, "", "", 0o644)}
    assert all(m.type == tarfile.REGTYPE for m in members)          # no pax headers, no directories
    assert index["env"] == {"TRITON_DISABLE_LINE_INFO": "true"} and index["archs"] == ["sm_90"]
    kernels = {e["kernel"] for e in index["entries"]}
    assert kernels == {"_decode_split_kernel", "_decode_merge_kernel", "_write_kv_kernel", "_rope_write_kv_kernel"}
    for e in index["entries"]:
        for name, sha in e["files"].items():
            assert hashlib.sha256(data[f"cache/{e['key']}/{name}"]).hexdigest() == sha
    assert len(names) == 1 + 2 * len(index["entries"])
    # No machine path leaks: not the source tree, not the cache, not the Python installation.
    for name, blob in data.items():
        for leak in (str(REPO), str(artifact.parent), sys.prefix, "/home/", "/root/"):
            assert leak.encode() not in blob, (name, leak)


def test_artifact_is_identical_from_another_source_path_and_cache(artifact, tmp_path):
    other = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(REPO / "engine", other / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "again.tar"
    res = build_artifact(tmp_path, out, source_parent=other)
    assert res.returncode == 0, res.stderr[-3000:]
    assert out.read_bytes() == artifact.read_bytes()


def test_cache_manager_serves_shipped_entries_exactly_when_the_key_matches(artifact, tmp_path):
    cache = tmp_path / "writable"
    res = subprocess.run([sys.executable, str(Path(__file__).with_name("aot_probe.py")), str(artifact),
                          str(tmp_path / "unpacked")], env=_env(cache, PYTHONPATH=str(REPO)),
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    served = out["served"]
    sm90 = [s for s in served if s["arch"] == 90]
    sm75 = [s for s in served if s["arch"] == 75]
    assert sm90 and all(s["from_artifact"] and s["cubin_bytes"] > 0 for s in sm90)
    assert sm75 and not any(s["from_artifact"] for s in sm75)
    with tarfile.open(artifact) as tf:
        shipped = {e["key"] for e in json.load(tf.extractfile("index.json"))["entries"]}
    assert {s["key"] for s in sm90} <= shipped and not ({s["key"] for s in sm75} & shipped)
    # The misses compiled into the writable cache; nothing was written into the shipped tree.
    assert {p.name for p in cache.iterdir() if p.is_dir()} >= {s["key"] for s in sm75}
    assert not any(p.name.startswith("tmp") or p.name.startswith("__grp__")
                   for p in (tmp_path / "unpacked").rglob("*"))
    st = out["status"]
    # Every lookup of a shipped key is a hit; a missed key compiles once, then Triton's own cache has it.
    assert st["aot_hits"] == len(sm90) and st["jit_compiles"] == len({s["key"] for s in sm75})
    assert st["source"] == "mixed"
    assert st["artifact_sha256"] == hashlib.sha256(artifact.read_bytes()).hexdigest()


def test_a_tampered_artifact_is_refused_naming_the_member(artifact, tmp_path):
    from engine.kernels.aot_cache import KernelsArtifactError, _unpack
    with tarfile.open(artifact) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
    bad = tmp_path / "bad.tar"
    victim = next(m.name for m, _ in members if m.name.endswith(".cubin"))
    with tarfile.open(bad, "w", format=tarfile.USTAR_FORMAT) as tf:
        for m, blob in members:
            if m.name == victim:
                blob = blob[:-1] + bytes([blob[-1] ^ 1])
            tf.addfile(m, io.BytesIO(blob))
    with pytest.raises(KernelsArtifactError, match=victim.replace(".", r"\.")):
        _unpack(bad, tmp_path / "unpacked")


@pytest.mark.parametrize("members,message", [
    ({"index.json": b'{"format": 1}'}, "index.json lacks entries"),
    ({"index.json": b"not json"}, "index.json is not JSON"),
    ({"index.json": b'{"entries": [], "env": {}}', "../evil": b"x"}, "unexpected member '../evil'"),
    ({"cache/x": b""}, "unexpected member 'cache/x'"),
])
def test_a_malformed_artifact_is_refused_with_a_clear_error(tmp_path, members, message):
    from engine.kernels.aot_build import write_tar
    from engine.kernels.aot_cache import KernelsArtifactError, _unpack
    bad = tmp_path / "bad.tar"
    write_tar(bad, members, EPOCH)
    with pytest.raises(KernelsArtifactError, match=message.replace(".", r"\.").replace("[", r"\[")):
        _unpack(bad, tmp_path / "unpacked")
    assert not (tmp_path / "unpacked").exists()
