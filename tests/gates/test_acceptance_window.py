"""The acceptance window on the local host, for real: a release whose wheel holds the real engine,
with its installer zipapp and QUICKSTART.md, composed, staged in a filesystem store and served on
127.0.0.1; the window downloads it anonymously, installs it with the zipapp, serves the tiny
reference model, runs the auth, openai and docs gates, and puts the host back as it found it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.releases.test_stage as staged_fixture
from gates.acceptance import run_window
from hosts.local import LocalHost
from releases import keys
from releases.candidate import candidate_ref
from releases.install.zipapp import build_zipapp
from releases.schema import errors as schema_errors
from releases.staging import served, stage_release
from releases.stores.local import LocalStore
from tests.releases.fixtures import candidate_record
from tests.releases.installable import MODEL, engine_members

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VERSION = staged_fixture.VERSION


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    base = tmp_path_factory.mktemp("acc")
    members = engine_members(base / "wheel")
    members[f"assay_engine-{VERSION}.dist-info/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: assay-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    real_make_wheel = staged_fixture.make_wheel
    priv = keys.load_private_key(keys.ensure_local_key(base / "keys")[0])
    mp = pytest.MonkeyPatch()
    mp.setattr(staged_fixture, "make_wheel", lambda path, version, extra=None: real_make_wheel(path, version, members))
    try:
        stager = staged_fixture._stage_ready(base / "ws", priv)
    finally:
        mp.undo()
    shutil.copy(ROOT / "docs" / "QUICKSTART.md", base / "QUICKSTART.md")
    stager.add_artifact(base / "QUICKSTART.md", "docs")
    stager.add_artifact(build_zipapp(base / "zipapp", VERSION), "installer")
    stager.write_sums()
    stager.compose()
    store = LocalStore(base / "store")
    return store, stage_release(stager.root, store, VERSION), (base / "keys" / keys.PUBLIC_NAME).read_text()


def _window(tmp_path, url, pem, **kw):
    import sys
    return run_window(LocalHost(), candidate_ref=candidate_ref(candidate_record(VERSION)), host_label="local",
                      staged_url=url, key_pem=pem, lane="cpu-reference", workdir=str(tmp_path / "acc-work"),
                      lease_path=str(tmp_path / "leases" / "gpu"), run_id="acc-test", max_hold_s=kw.pop("max_hold_s", 900),
                      model=str(MODEL), base_python=sys.executable, progress=print,
                      # the zipapp needs the verifier's packages (rfc8785, cryptography): this venv has them
                      python=sys.executable, **kw)


def test_the_window_installs_serves_and_restores(tmp_path, release):
    store, st, pem = release
    with served(store, st) as url:
        pred, details = _window(tmp_path, url, pem)
    assert pred["verdict"] == "pass", (details, pred["routes"])
    assert schema_errors("acceptance", pred) == []
    assert [r["name"] for r in pred["routes"]] == ["download", "install", "start", "auth", "behaviour", "docs",
                                                   "stop", "restore-audit"]
    assert pred["downloads"][0]["name"] == "SHA256SUMS" and all(d["matched"] for d in pred["downloads"])
    assert any(d["name"].endswith(".pyz") for d in pred["downloads"])
    assert pred["assets"] and all(a["name"].startswith("artifacts/") for a in pred["assets"])
    assert pred["auth"] == {"authenticated_status": 200, "anonymous_status": 401}
    assert {b["name"] for b in pred["behaviour"]} == {"chat-completion", "chat-streaming", "bad-key-refused"}
    assert all(b["passed"] for b in pred["behaviour"])
    assert pred["docs"]["asset"] == "QUICKSTART.md" and len(pred["docs"]["blocks"]) >= 3
    assert all(b["exit_status"] == 0 and len(b["sha256"]) == 64 for b in pred["docs"]["blocks"])
    assert pred["restore"]["restored"] is True and pred["restore"]["audit_passed"] is True
    assert 0 < pred["hold_s"] <= pred["max_hold_s"] == 900
    assert not (tmp_path / "acc-work").exists()


def test_a_failing_window_still_restores_and_says_why(tmp_path, release):
    store, st, _ = release
    other = keys.load_private_key(keys.ensure_local_key(tmp_path / "other")[0])
    wrong_pem = keys.public_pem(other.public_key())   # not the key the release is signed with
    with served(store, st) as url:
        pred, details = _window(tmp_path, url, wrong_pem)
    assert pred["verdict"] == "fail"
    assert schema_errors("acceptance", pred) == []   # a failed window is still a complete record
    routes = {r["name"]: r for r in pred["routes"]}
    assert routes["download"]["status"] == "pass" and routes["install"]["status"] == "fail"
    assert "refused" in routes["install"]["facts"]["error"]
    assert routes["start"]["status"] == "skipped" and "stop" not in routes
    assert pred["restore"]["audit_passed"] is True and pred["window"]["restored"] is True
    assert details["problems"][0].startswith("install:")
    assert not (tmp_path / "acc-work").exists()


def _installer(tmp_path, *args):
    import json
    import subprocess
    import sys
    zipapp = build_zipapp(tmp_path / "zipapp", VERSION)
    proc = subprocess.run([sys.executable, str(zipapp), *args, "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_running_incumbent_is_stopped_and_started_again_as_found(tmp_path, release):
    """The release already serving on the host (installed in its own prefix) is stopped for the window
    and started again as found: same release, same port, same key file and model; the audit passes."""
    import socket
    import sys
    store, st, pem = release
    incumbent, key_file = tmp_path / "incumbent", tmp_path / "incumbent-key"
    key_file.write_text("inc-" + "0" * 32 + "\n")
    key_file.chmod(0o600)
    (tmp_path / "release.pub.pem").write_text(pem)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with served(store, st) as url:
        _installer(tmp_path, "install", url, "--prefix", str(incumbent), "--key", str(tmp_path / "release.pub.pem"),
                   "--base-python", sys.executable)
        first = _installer(tmp_path, "start", "--prefix", str(incumbent), "--port", str(port), "--api-key-file",
                           str(key_file), "--model", str(MODEL))
        try:
            pred, details = _window(tmp_path, url, pem, incumbent_prefix=str(incumbent))
            after = _installer(tmp_path, "status", "--prefix", str(incumbent))
        finally:
            _installer(tmp_path, "stop", "--prefix", str(incumbent))
    assert pred["verdict"] == "pass", (details, pred["routes"])
    assert schema_errors("acceptance", pred) == []
    routes = {r["name"]: r for r in pred["routes"]}
    assert [r["name"] for r in pred["routes"]] == ["download", "stop-incumbent", "install", "start", "auth",
                                                   "behaviour", "docs", "stop", "restore-incumbent", "restore-audit"]
    assert routes["stop-incumbent"]["facts"] == {"running": True, "stopped": "stopped", "version": VERSION, "port": port}
    assert routes["restore-incumbent"]["facts"] == {"version": VERSION, "port": port, "same_config": True}
    assert after["service"]["running"] is True and after["service"]["port"] == port
    assert after["service"]["pid"] != first["pid"]   # a new process of the same service, as found
    assert pred["restore"]["audit_passed"] is True
