"""The digests a verdict carries: inputs and waivers (releases' canonical JSON), and this package's code."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from releases.canonical import canonical_json, digest, sha256_hex

__all__ = ["PACKAGE_DIR", "canonical_json", "code_digest", "digest", "sha256_hex"]

PACKAGE_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over gates/stats sources: digest of {relative path: sha256 of bytes} for *.py and *.json.

    A verdict names the exact judging code, so a changed judge cannot pass off old verdicts as its own.
    """
    files = sorted(
        p for p in PACKAGE_DIR.rglob("*")
        if p.is_file() and p.suffix in {".py", ".json"} and "__pycache__" not in p.parts
    )
    return digest({p.relative_to(PACKAGE_DIR).as_posix(): sha256_hex(p.read_bytes()) for p in files})
