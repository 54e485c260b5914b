"""The verify/show CLI, driven through typer's runner on real release directories."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from releases.cli import app
from releases.keys import key_id

runner = CliRunner()


def test_verify_ok_exits_zero(published_release):
    kid = key_id(published_release.public_key)
    result = runner.invoke(app, ["verify", str(published_release.root), "--require-ready", "--expect-key-id", kid])
    assert result.exit_code == 0, result.output
    assert "OK" in result.stdout and "state=published" in result.stdout
    assert f"trusted key {kid}" in result.stdout


def test_verify_failure_lists_file_and_field(published_release):
    (published_release.root / "ledger.json").write_text("{}")
    result = runner.invoke(app, ["verify", str(published_release.root), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert {"file": "ledger.json", "field": "sha256"} in [{k: f[k] for k in ("file", "field")} for f in report["failures"]]
    table = runner.invoke(app, ["verify", str(published_release.root)], env={"COLUMNS": "200"})
    assert table.exit_code == 1
    assert "ledger.json" in table.output and "FAILED" in table.output


def test_verify_with_key_and_private_marker(published_release):
    key = published_release.root / "keys" / "release.pub.pem"
    result = runner.invoke(app, ["verify", str(published_release.root), "--key", str(key), "--json",
                                 "--private-marker", "gpu-lane-1"])
    assert result.exit_code == 1
    fields = {f["field"] for f in json.loads(result.stdout)["failures"]}
    assert "/payload/predicate/host" in fields


def test_show_prints_state_and_verdicts(published_release):
    result = runner.invoke(app, ["show", str(published_release.root)], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    assert "state published" in result.output
    assert published_release.candidate_ref["commit"] in result.output
    assert "reproducible" in result.output and "approve" in result.output and "pass" in result.output
    assert "approval: approve by release-manager, UNSIGNED" in result.stdout


def test_show_unreadable_release(tmp_path):
    result = runner.invoke(app, ["show", str(tmp_path)])
    assert result.exit_code == 3  # bad input (releases/exit_codes.py)
    assert "cannot read release" in result.stderr
