"""`assay keys new`, `assay waive`, `assay approve --key` and the approver/grantor keys of assay.toml."""
from __future__ import annotations

import json
import os
import stat

import pytest
from typer.testing import CliRunner

from flows.approval import Approval
from flows.cli import app
from flows.config import ConfigError, load_config
from releases import manifest as mf
from releases.approval import check_signed_decision
from releases.canonical import load_json_bytes
from releases.keys import key_id, load_private_key
from releases.waivers import bind_waiver, check_waiver_signature
from tests.releases.fixtures import build_release

runner = CliRunner()


@pytest.fixture(autouse=True)
def user_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return tmp_path / "cfg"


def _new_key(name: str) -> tuple[str, str]:
    result = runner.invoke(app, ["keys", "new", "--as", name])
    assert result.exit_code == 0, result.output
    pem = result.stdout[result.stdout.index("-----BEGIN PUBLIC KEY-----"):result.stdout.index("-----END PUBLIC KEY-----") + 25]
    kid = result.stdout.split("key id: ")[1].split()[0]
    return pem, kid


def test_keys_new_writes_a_private_key_0600_and_prints_the_public_key(user_config):
    pem, kid = _new_key("release-manager")
    path = user_config / "assay" / "keys" / "release-manager.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert key_id(load_private_key(path).public_key()) == kid
    again = runner.invoke(app, ["keys", "new", "--as", "release-manager"])
    assert again.exit_code == 3 and "already exists" in again.stderr
    bad = runner.invoke(app, ["keys", "new", "--as", "../escape"])
    assert bad.exit_code == 3 and "must match" in bad.stderr
    elsewhere = runner.invoke(app, ["keys", "new", "--as", "ops", "--dir", str(user_config / "other")])
    assert elsewhere.exit_code == 0 and (user_config / "other" / "ops.pem").is_file()


def test_waive_signs_a_waiver_bound_to_candidate_gate_lane_case(tmp_path):
    rel = build_release(tmp_path / "1.2.3", state="ready")
    pem, kid = _new_key("oncall-lead")
    out = tmp_path / "waiver.json"
    result = runner.invoke(app, ["waive", "--candidate", str(rel.root / "candidate.json"), "--gate", "speed-floor",
                                 "--lane", "h200", "--case", "batch-1/1k", "--measured", "0.97",
                                 "--reason", "within noise", "--as", "oncall-lead", "--out", str(out)])
    assert result.exit_code == 0, result.output
    waiver = load_json_bytes(out.read_bytes())
    assert (waiver["gate"], waiver["lane"], waiver["case"], waiver["measured"]) == ("speed-floor", "h200", "batch-1/1k", "0.97")
    assert waiver["id"] == "speed-floor-h200-batch-1-1k" and waiver["scope"] == "gate"
    assert bind_waiver(waiver, rel.candidate_ref) is waiver
    assert check_waiver_signature(waiver, {"oncall-lead": pem}) == kid
    unreadable = runner.invoke(app, ["waive", "--candidate", str(tmp_path / "absent.json"), "--gate", "g", "--lane", "l",
                                     "--case", "c", "--measured", "1", "--reason", "r", "--as", "oncall-lead",
                                     "--out", str(tmp_path / "w2.json")])
    assert unreadable.exit_code == 3 and "absent.json" in unreadable.stderr
    assert not (tmp_path / "w2.json").exists()


def test_approve_signs_the_ready_manifest_digest_before_sending(tmp_path):
    rel = build_release(tmp_path / "1.2.3", state="ready")
    pem, kid = _new_key("release-manager")
    result = runner.invoke(app, ["approve", "not-a-run-id", "--as", "release-manager", "--reason", "green",
                                 "--manifest", str(rel.root / "manifest.json"), "--waiver", "lane-latency-p99"])
    digest = mf.approval_digest(rel.manifest)
    assert f"signed with key {kid} over ready manifest {digest}" in result.stdout
    assert result.exit_code == 2 and "not a flow run id" in result.stderr  # signed, then nothing to resume


def test_approval_input_carries_a_signature():
    rel_sig = {"payloadType": "application/vnd.assay.approval-decision+json", "payload": "e30=",
               "signatures": [{"keyid": "k", "sig": "AAAA"}]}
    form = Approval(decision="approve", approver="release-manager", reason="ok", signature=rel_sig)
    assert form.signature == rel_sig
    assert Approval(decision="approve", approver="local-operator", reason="ok").signature is None


def _write(tmp_path, release_extra: str) -> str:
    path = tmp_path / "assay.toml"
    path.write_text(f'[release]\nname = "x"\nsource = "."\nsubdir = "engine"\n{release_extra}\n'
                    '[store]\nkind = "filesystem"\npath = "store"\n[build]\nhosts = ["local", "local"]\n'
                    '[[lanes]]\nname = "cpu-smoke"\nkind = "cpu-smoke"\nhost = "local"\n')
    return str(path)


def test_config_lists_approvers_and_grantors_with_keys(tmp_path):
    pem, _ = _new_key("release-manager")
    cfg = load_config(_write(tmp_path, f'allow_unsigned_approval = false\n[release.approvers.release-manager]\n'
                                       f'public_key = """{pem}"""\n[release.waiver_grantors.release-manager]\n'
                                       f'public_key = """{pem}"""\n'))
    assert cfg.approvers == ["release-manager"]
    assert cfg.approver_keys == {"release-manager": pem} and cfg.waiver_grantors == {"release-manager": pem}
    assert cfg.allow_unsigned_approval is False
    names_only = load_config(_write(tmp_path, 'approvers = ["ops"]\n'))
    assert names_only.approver_keys == {"ops": None} and names_only.allow_unsigned_approval is False
    defaults = load_config()
    assert defaults.approvers == ["local-operator"] and defaults.allow_unsigned_approval is True
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, '[release.approvers.ops]\npublic_key = "not a key"\n'))
    assert "/release/approvers" in str(info.value)
