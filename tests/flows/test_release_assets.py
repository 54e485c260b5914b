"""The assets package_release stages beside the build's: the installer zipapp (deterministic, runnable)
and the quickstart; a release composed with them verifies ready, both listed in SHA256SUMS and
neither held to the build receipts."""
from __future__ import annotations

import subprocess
import sys

import pytest

from flows.release_assets import QUICKSTART, shipped_with
from releases import keys
from releases.sums import parse_sums
from tests.releases.test_stage import _stage_ready

CANDIDATE = {"release_version": "1.2.3+g0123456789ab"}


@pytest.fixture
def key(tmp_path):
    path, _ = keys.ensure_local_key(tmp_path / "keys")
    return keys.load_private_key(path)


def test_the_installer_is_deterministic_and_runs(tmp_path):
    (installer_a, kind_a), (docs, kind_d) = shipped_with(CANDIDATE, tmp_path / "a")
    (installer_b, _), _ = shipped_with(CANDIDATE, tmp_path / "b")
    assert (kind_a, kind_d) == ("installer", "docs")
    assert installer_a.name == "assay-install-1.2.3+g0123456789ab.pyz"
    assert installer_a.read_bytes() == installer_b.read_bytes()
    assert docs.read_bytes() == QUICKSTART.read_bytes()
    proc = subprocess.run([sys.executable, str(installer_a), "status", "--prefix", str(tmp_path / "none"), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 3), proc.stderr
    assert proc.stdout.strip().startswith("{"), proc.stdout


def test_a_release_with_them_verifies_ready(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    entries = [stager.add_artifact(p, kind) for p, kind in shipped_with(CANDIDATE, tmp_path / "assets")]
    stager.write_sums()
    manifest = stager.compose()
    kinds = {a["path"]: a["kind"] for a in manifest["artifacts"]}
    assert kinds["artifacts/assay-install-1.2.3+g0123456789ab.pyz"] == "installer"
    assert kinds["artifacts/QUICKSTART.md"] == "docs"
    sums = parse_sums((stager.root / "SHA256SUMS").read_bytes())
    assert {e["path"]: e["sha256"] for e in entries}.items() <= sums.items()
    report = stager.verify(require_ready=True)
    assert [(f.file, f.message) for f in report.failures] == []
