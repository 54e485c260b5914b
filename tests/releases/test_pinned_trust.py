"""Pinned trust: verify takes its trust root from the user, never silently from the release."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from releases.cli import app
from releases.keys import key_id, public_pem
from releases.verify import verify_release
from tests.releases.fixtures import build_release

runner = CliRunner()


@pytest.fixture
def resigned(tmp_path):
    """The same release, re-signed end to end by someone else's key (every receipt, the manifest)."""
    return build_release(tmp_path / "mirror" / "1.2.3", key_dir=tmp_path / "intruder-key")


def _verify(*args: str, env: dict | None = None):
    return runner.invoke(app, ["verify", *args], env={"COLUMNS": "250", **(env or {})})


def test_resigned_release_is_refused_by_the_original_key_id(published_release, resigned):
    original, intruder = key_id(published_release.public_key), key_id(resigned.public_key)
    assert original != intruder
    assert _verify(str(published_release.root), "--require-ready", "--expect-key-id", original).exit_code == 0
    result = _verify(str(resigned.root), "--require-ready", "--expect-key-id", original)
    assert result.exit_code == 1, result.output
    assert intruder in result.output and original in result.output
    report = verify_release(resigned.root, expected_key_id=original)
    assert not report.ok and report.key_id == intruder
    assert ("keys/release.pub.pem", "key_id") in {(f.file, f.field) for f in report.failures}


def test_resigned_release_is_refused_by_a_trust_file(published_release, resigned, tmp_path):
    trust = tmp_path / "cfg" / "assay" / "trust.toml"
    trust.parent.mkdir(parents=True)
    pem = public_pem(published_release.public_key).decode()
    trust.write_text(f'[[release_keys]]\nname = "engine releases"\npublic_key = """{pem}"""\n')
    ok = _verify(str(published_release.root), "--require-ready", "--trust", str(trust))
    assert ok.exit_code == 0, ok.output
    assert f"trusted key {key_id(published_release.public_key)}" in ok.output
    assert "trust file" in ok.output
    refused = _verify(str(resigned.root), "--require-ready", "--trust", str(trust))
    assert refused.exit_code == 1
    assert key_id(resigned.public_key) in refused.output
    # The default trust file is found through XDG_CONFIG_HOME, with no option at all.
    by_default = _verify(str(resigned.root), "--json", env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert by_default.exit_code == 1
    report = json.loads(by_default.stdout)
    assert report["trust"] == "pinned key id" and report["key_id"] == key_id(resigned.public_key)


def test_embedded_key_warns_and_require_ready_refuses_it(published_release, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "empty")}
    plain = _verify(str(published_release.root), "--json", env=env)
    assert plain.exit_code == 0
    assert "warning: trusted the key inside the release" in plain.stderr
    assert json.loads(plain.stdout)["trust"] == "embedded key (not pinned)"
    ready = _verify(str(published_release.root), "--require-ready", env=env)
    assert ready.exit_code == 1
    assert "--trust-embedded-key" in ready.output
    assert "NOT PINNED" in ready.stdout
    accepted = _verify(str(published_release.root), "--require-ready", "--trust-embedded-key", env=env)
    assert accepted.exit_code == 0, accepted.output
    assert "warning" in accepted.stderr


def test_given_key_is_named_in_the_output(published_release):
    pem = published_release.root.parent / "pinned.pem"
    pem.write_bytes(public_pem(published_release.public_key))
    result = _verify(str(published_release.root), "--require-ready", "--key", str(pem))
    assert result.exit_code == 0, result.output
    assert f"trusted key {key_id(published_release.public_key)} (--key {pem})" in result.stdout
    assert "key inside the release" not in result.stderr


def test_expected_commit_and_version(published_release):
    kid = key_id(published_release.public_key)
    root = str(published_release.root)
    assert _verify(root, "--expect-key-id", kid, "--expect-commit", published_release.candidate_ref["commit"],
                   "--expect-version", "1.2.3").exit_code == 0
    wrong = _verify(root, "--expect-key-id", kid, "--expect-commit", "f" * 40, "--expect-version", "1.2.4", "--json")
    assert wrong.exit_code == 1
    fields = {(f["file"], f["field"]) for f in json.loads(wrong.stdout)["failures"]}
    assert fields == {("manifest.json", "candidate/commit"), ("manifest.json", "version")}


def test_folder_must_be_named_for_the_version(published_release):
    renamed = published_release.root.rename(published_release.root.parent / "1.2.4")
    result = _verify(str(renamed), "--expect-key-id", key_id(published_release.public_key), "--json")
    assert result.exit_code == 1
    (failure,) = json.loads(result.stdout)["failures"]
    assert failure["field"] == "version" and "'1.2.4'" in failure["message"]
    assert verify_release(renamed).ok  # the library checks the folder only when asked


@pytest.mark.parametrize("body, fragment", [
    ("release_keys = 3\n", "release_keys"),
    ("[[release_keys]]\nname = 'x'\n", "release_keys[0]: needs key_id or public_key"),
    ("[[release_keys]]\nkey_id = 'XYZ'\n", "release_keys[0].key_id"),
    ("[[release_keys]]\npublic_key = 'not a pem'\n", "release_keys[0].public_key"),
    ("[[release_keys]]\nkey_id = '" + "a" * 64 + "'\ncolour = 1\n", "release_keys[0].colour"),
    ("not = [toml\n", "not valid TOML"),
])
def test_malformed_trust_file_is_bad_input(published_release, tmp_path, body, fragment):
    trust = tmp_path / "trust.toml"
    trust.write_text(body)
    result = _verify(str(published_release.root), "--trust", str(trust))
    assert result.exit_code == 3, result.output
    assert fragment in result.stderr and str(trust) in result.stderr
    assert "Traceback" not in result.output


def test_missing_key_or_trust_file_is_bad_input(published_release, tmp_path):
    for option in ("--key", "--trust"):
        result = _verify(str(published_release.root), option, str(tmp_path / "absent"))
        assert result.exit_code == 3
        assert "absent" in result.stderr and "Traceback" not in result.output
