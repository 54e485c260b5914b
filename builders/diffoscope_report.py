"""diffoscope reports (HTML and JSON) of one differing artifact, kept as evidence next to the receipt.

The typed member differences (builders.compare) stay the machine-readable truth; diffoscope's
reports are for a person reading what changed, and the reproducibility record binds each report
by name and sha256. diffoscope is pinned in pyproject.toml and runs from this interpreter;
diffoscope uses the system's unzip/zipinfo where present and falls back to its own readers.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from builders.errors import CompareError
from releases.canonical import file_sha256

TIMEOUT_S = 600.0


def report(path_a: Path, path_b: Path, out_dir: Path) -> dict:
    """{artifact, html: {name, sha256}, json: {name, sha256}} for the reports written into OUT_DIR.
    diffoscope exits 1 when the files differ (the normal case here) and 2 on its own error."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"diffoscope-{path_a.name}"
    html, js = out_dir / f"{stem}.html", out_dir / f"{stem}.json"
    argv = [sys.executable, "-m", "diffoscope.main", "--html", str(html), "--json", str(js),
            "--no-progress", str(path_a), str(path_b)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CompareError(f"diffoscope on {path_a.name} ran past {TIMEOUT_S:.0f} s") from None
    if proc.returncode not in (0, 1) or not html.is_file() or not js.is_file():
        raise CompareError(f"diffoscope on {path_a.name} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return {"artifact": path_a.name,
            "html": {"name": html.name, "sha256": file_sha256(html)},
            "json": {"name": js.name, "sha256": file_sha256(js)}}
