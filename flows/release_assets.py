"""The assets a release ships beside what the build produced: the installer zipapp and the
quickstart. Both are written by the pipeline, not built from the candidate, so they carry their
own artifact kinds ("installer", "docs") that build and reproducibility receipts do not cover."""

from __future__ import annotations

import shutil
from pathlib import Path

from releases.install.zipapp import build_zipapp

# The quickstart lives in this repository's docs/ (it documents the installer and the API the
# release serves); its executable blocks are what the acceptance window runs.
QUICKSTART = Path(__file__).resolve().parents[1] / "docs" / "QUICKSTART.md"


def shipped_with(candidate: dict, out_dir: Path) -> list[tuple[Path, str]]:
    """Write the installer zipapp for the candidate's release version and copy the quickstart into
    OUT_DIR; returns [(path, artifact kind)]. The zipapp is deterministic: the same source gives the
    same bytes, so a retried task stages the same asset."""
    out_dir.mkdir(parents=True, exist_ok=True)
    installer = build_zipapp(out_dir, candidate["release_version"])
    docs = out_dir / QUICKSTART.name
    shutil.copyfile(QUICKSTART, docs)
    return [(installer, "installer"), (docs, "docs")]
