"""assay-verify, the release layer as its own distribution: installed alone into a fresh venv (no
Prefect, no torch, no pipeline), it verifies a release published to a store."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from releases.keys import key_id, public_pem
from releases.publish import publish_release
from releases.stores import LocalStore
from tests.releases.fixtures import build_release

REPO = Path(__file__).resolve().parents[2]


def _run(argv, cwd, timeout=120):
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_assay_verify_installed_alone_verifies_a_published_release(tmp_path):
    rel = build_release(tmp_path / "stage" / "1.2.3")
    publish_release(rel.root, LocalStore(tmp_path / "store"), "1.2.3", public_key=rel.public_key)
    published = tmp_path / "store" / "1.2.3"
    pem = tmp_path / "release.pub.pem"
    pem.write_bytes(public_pem(rel.public_key))

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", venv], tmp_path).returncode == 0
    python, verifier = venv / "bin" / "python", venv / "bin" / "assay-verify"
    # pip resolves the pinned dependencies from its configured index (the machine's local wheels).
    install = _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", REPO / "releases"],
                   tmp_path, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]

    # Run from outside the checkout: only what the venv installed is importable.
    where = _run([python, "-c", "import releases; print(releases.__file__)"], tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    for absent in ("prefect", "torch", "flows", "builders", "gates", "hosts", "engine", "boto3"):
        assert _run([python, "-c", f"import {absent}"], tmp_path).returncode != 0, f"{absent} is importable"

    ok = _run([verifier, "verify", "--require-ready", "--key", pem, published], tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"trusted key {key_id(rel.public_key)}" in ok.stdout and "OK" in ok.stdout
    by_id = _run([verifier, "verify", "--require-ready", "--expect-key-id", key_id(rel.public_key), "--json",
                  published], tmp_path)
    assert by_id.returncode == 0 and '"ok": true' in by_id.stdout

    (published / "SHA256SUMS").write_text("tampered\n")
    refused = _run([verifier, "verify", "--key", pem, published], tmp_path)
    assert refused.returncode == 1 and "SHA256SUMS" in refused.stdout and "Traceback" not in refused.stderr
