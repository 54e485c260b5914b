"""The CLI's exit codes on bad usage, bad input and an unreachable server; nothing is written."""

import json
import socket
import subprocess
import sys

import pytest


def _free_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _run(tmp_path, *extra):
    argv = [sys.executable, "-m", "gates.judged", "--candidate-url", _free_url(), "--incumbent-url", _free_url(),
            "--lane", "cpu-smoke", "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_unreachable_server_exits_4(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert "unavailable: candidate server http://127.0.0.1:" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,content,message", [
    ("settings.json", json.dumps({"abba": {"min_ratoi": 2}}), "gate settings gates.abba.min_ratoi: unknown key"),
    ("settings.json", "{not json", "settings"),
    ("settings.json", json.dumps([1]), "expected a JSON object"),
])
def test_bad_settings_exit_3_naming_the_key(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    proc = _run(tmp_path, "--settings", str(tmp_path / name))
    assert proc.returncode == 3, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_bad_identity_and_key_file_exit_3(tmp_path):
    (tmp_path / "inc.json").write_text(json.dumps({"version": "1", "wheel_sha256": "xyz", "source_commit": None,
                                                   "origin": "ref"}))
    proc = _run(tmp_path, "--incumbent-identity", str(tmp_path / "inc.json"))
    assert proc.returncode == 3 and "incumbent identity.wheel_sha256" in proc.stderr
    (tmp_path / "keys").write_text("# only a comment\n")
    proc = _run(tmp_path, "--api-key-file", str(tmp_path / "keys"))
    assert proc.returncode == 3 and "no key in it" in proc.stderr


def test_usage_error_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gates.judged", "--lane", "x"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--candidate-url" in proc.stderr
