"""Signed release directories that the installer can really install and start: the wheel holds the
real engine package (built from engine/ once), relabelled with the release's version, on top of
fixtures.build_release. Incumbent and candidate share one signing key, as consecutive releases do."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from releases.keys import PUBLIC_NAME
from tests.releases.fixtures import SyntheticRelease, build_release

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / ".assay" / "models" / "smollm2-135m-instruct"


def engine_members(out: Path) -> dict[str, bytes]:
    """The files of the engine package, from a wheel built from engine/ (dist-info left out: the
    release's wheel writes its own, with the release's version)."""
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(ROOT / "engine")],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in sorted(zf.namelist()) if n.startswith("engine/")}


def installable_release(root: Path, version: str, key_dir: Path, members: dict[str, bytes]) -> SyntheticRelease:
    # pip needs the WHEEL file, which the synthetic wheel leaves out.
    wheel_file = {f"assay_engine-{version}.dist-info/WHEEL":
                  "Wheel-Version: 1.0\nGenerator: assay-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    return build_release(root, version=version, key_dir=key_dir, wheel_members={**members, **wheel_file})


def public_key(key_dir: Path) -> Path:
    return key_dir / PUBLIC_NAME
