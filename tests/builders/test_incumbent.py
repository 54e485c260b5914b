"""The incumbent: the store's latest published release first, else the config's ref (built once by
the release recipe, cached by commit) or wheel; identity {version, wheel_sha256, source_commit}."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from builders.errors import IncumbentError
from builders.incumbent import from_wheel, resolve_incumbent
from flows.config import load_config
from releases.stores.local import LocalStore
from releases.sums import format_sums

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REF = load_config().incumbent["ref"]


def _publish(store_root: Path, version: str, wheel_bytes: bytes, *, sums_sha: str | None = None,
             manifest_sha: str | None = None, commit: str = "1" * 40) -> str:
    """A release in a LocalStore with what the incumbent reads: manifest.json (the commit point),
    SHA256SUMS and the wheel. Written with the store's own put_file."""
    store = LocalStore(store_root)
    name = f"assay_engine-{version}-py3-none-any.whl"
    sha = hashlib.sha256(wheel_bytes).hexdigest()
    tmp = store_root.parent / f"stage-{version}"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_bytes(wheel_bytes)
    (tmp / "SHA256SUMS").write_bytes(format_sums({f"artifacts/{name}": sums_sha or sha}))
    manifest = {"version": version, "state": "published", "candidate": {"id": "2" * 64, "commit": commit, "tree": "3" * 40},
                "artifacts": [{"path": f"artifacts/{name}", "sha256": manifest_sha or sums_sha or sha,
                               "size": len(wheel_bytes), "kind": "wheel"}]}
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    store.put_file(f"{version}/artifacts/{name}", tmp / name)
    store.put_file(f"{version}/SHA256SUMS", tmp / "SHA256SUMS")
    store.put_file(f"{version}/manifest.json", tmp / "manifest.json")
    return sha


def test_the_latest_published_release_wins_over_the_config(tmp_path):
    _publish(tmp_path / "store", "0.1.0", b"old wheel")
    sha = _publish(tmp_path / "store", "0.2.0", b"new wheel", commit="4" * 40)
    inc = resolve_incumbent({"ref": "no-such-ref"}, repo_dir=ROOT, state_dir=tmp_path / "state",
                            store=LocalStore(tmp_path / "store"))
    assert inc.identity == {"version": "0.2.0", "wheel_sha256": sha, "source_commit": "4" * 40, "origin": "store"}
    assert inc.wheel.read_bytes() == b"new wheel"


def test_a_store_wheel_that_does_not_match_its_sums_is_refused(tmp_path):
    _publish(tmp_path / "store", "0.3.0", b"tampered bytes", sums_sha="5" * 64)
    with pytest.raises(IncumbentError, match=r"0.3.0: artifacts/assay_engine-0.3.0-py3-none-any.whl downloaded "
                                             r"with sha256 [0-9a-f]{64}, SHA256SUMS says 5{64}"):
        resolve_incumbent({}, repo_dir=ROOT, state_dir=tmp_path / "state", store=LocalStore(tmp_path / "store"))
    assert not list((tmp_path / "state").rglob("*.whl"))  # nothing half-written is left to reuse


def test_sums_and_manifest_must_agree(tmp_path):
    _publish(tmp_path / "store", "0.4.0", b"w", sums_sha="6" * 64, manifest_sha="7" * 64)
    with pytest.raises(IncumbentError, match="is 6{64} in SHA256SUMS but 7{64} in the manifest"):
        resolve_incumbent({}, repo_dir=ROOT, state_dir=tmp_path / "state", store=LocalStore(tmp_path / "store"))


def test_empty_store_and_no_config_is_a_typed_error(tmp_path):
    with pytest.raises(IncumbentError, match="neither ref nor wheel"):
        resolve_incumbent({}, repo_dir=ROOT, state_dir=tmp_path, store=LocalStore(tmp_path / "store"))
    with pytest.raises(IncumbentError, match="incumbent from ref: no-such-ref"):
        resolve_incumbent({"ref": "no-such-ref"}, repo_dir=ROOT, state_dir=tmp_path, store=None)
    with pytest.raises(IncumbentError, match="is not a file"):
        from_wheel(tmp_path / "missing.whl")


def test_a_wheel_path(tmp_path):
    wheel = tmp_path / "assay_engine-0.0.9-py3-none-any.whl"
    wheel.write_bytes(b"a wheel")
    inc = resolve_incumbent({"wheel": str(wheel)}, repo_dir=ROOT, state_dir=tmp_path, store=LocalStore(tmp_path / "s"))
    assert inc.identity == {"version": "0.0.9", "wheel_sha256": hashlib.sha256(b"a wheel").hexdigest(),
                            "source_commit": None, "origin": "wheel"}


@pytest.mark.slow
def test_the_default_ref_builds_once_and_is_reused_from_the_cache(tmp_path):
    first = resolve_incumbent({"ref": DEFAULT_REF}, repo_dir=ROOT, state_dir=tmp_path, store=LocalStore(tmp_path / "s"))
    assert first.identity["source_commit"] == DEFAULT_REF and first.identity["origin"] == "ref"
    assert first.identity["version"] == "0.1.0" and first.wheel.name == "assay_engine-0.1.0-py3-none-any.whl"
    assert hashlib.sha256(first.wheel.read_bytes()).hexdigest() == first.identity["wheel_sha256"]
    assert first.wheel.parent == tmp_path / "incumbent" / DEFAULT_REF
    stamp = first.wheel.stat().st_mtime_ns
    again = resolve_incumbent({"ref": DEFAULT_REF[:7]}, repo_dir=ROOT, state_dir=tmp_path, store=None)
    assert again == first and again.wheel.stat().st_mtime_ns == stamp  # the cache, not a rebuild
    # A damaged cache entry is rebuilt, and the recipe is reproducible: the same bytes come back.
    first.wheel.write_bytes(b"damaged")
    rebuilt = resolve_incumbent({"ref": DEFAULT_REF}, repo_dir=ROOT, state_dir=tmp_path, store=None)
    assert rebuilt.identity == first.identity
    assert not [p for p in os.listdir(tmp_path / "incumbent") if p.startswith(".build-")]


def test_a_ref_is_built_without_its_kernels_step(tmp_path):
    # The incumbent is served from its wheel alone: a ref whose kernels step cannot even run builds.
    from builders.incumbent import from_ref
    from tests.builders.conftest import fixture_files, make_repo

    files = fixture_files(subdir="engine")
    files["engine/pyproject.toml"] += '\n[tool.assay.kernels]\nmodule = "fixturepkg.no_such_kernels"\n'
    repo = make_repo(tmp_path / "repo", files)
    inc = from_ref(repo, "HEAD", tmp_path / "cache")
    assert inc.wheel.name == "fixture_pkg-1.2.3-py3-none-any.whl" and inc.identity["origin"] == "ref"
    assert sorted(p.name for p in inc.wheel.parent.iterdir()) == ["fixture_pkg-1.2.3-py3-none-any.whl", "identity.json"]


@pytest.mark.slow
def test_the_default_incumbent_serves_the_tiny_model(tmp_path):
    """The embedded default must stay a working incumbent: its wheel, installed on its own (not the
    working tree's engine), serves the tiny model and answers a chat completion."""
    import socket
    import subprocess
    import sys
    import time

    import httpx

    inc = resolve_incumbent({"ref": DEFAULT_REF}, repo_dir=ROOT, state_dir=tmp_path, store=None)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(inc.wheel)], check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-c", "import engine; print(engine.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(target))
    subprocess.run([sys.executable, "-m", "engine", "make-tiny-model", str(tmp_path / "tiny")], cwd=tmp_path,
                   env=env, check=True, capture_output=True, timeout=300)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = {"model": {"path": str(tmp_path / "tiny"), "name": "tiny"}, "device": "cpu", "dtype": "float32",
               "kv_dtype": "float32", "max_context": 256, "kv_capacity": 1024, "host_memory_mib": 512,
               "admission_headroom_mib": 16}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--profile", "profile.json", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            assert proc.poll() is None, "the incumbent's server exited"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        reply = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, "temperature": 0})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
