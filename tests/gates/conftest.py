"""What the lane tests share: the candidate engine built into a wheel once per session, a
candidate record for it, a signing key, and lane specs with sizes small enough for tests that
only exercise mechanics (the full-size cpu-reference chain is its own slow test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gates.spec import LaneSpec
from releases.keys import ensure_local_key, load_private_key

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / ".assay" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def engine_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(ROOT / "engine")],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="session")
def candidate() -> dict:
    import engine

    return {"candidate_schema": "assay/candidate/v1", "source": {"name": "assay", "subdir": "engine", "ref": "HEAD"},
            "commit": "a" * 40, "tree": "b" * 40, "source_date_epoch": 1700000000, "dirty": False,
            "dirty_digest": None, "package": {"name": "assay-engine", "version": engine.__version__},
            "release_version": engine.__version__}


@pytest.fixture(scope="session")
def signing_key(tmp_path_factory):
    path, _ = ensure_local_key(tmp_path_factory.mktemp("keys"))
    return load_private_key(path)


def reference_model() -> Path:
    assert (MODEL / "config.json").exists(), "the reference model is missing: run `make model`"
    return MODEL


def smoke_spec(tmp_path: Path, **settings) -> LaneSpec:
    phases = settings.pop("phases", ())
    return LaneSpec(name="cpu-smoke", kind="cpu-smoke", host="local", phases=tuple(phases),
                    lease_path=str(tmp_path / "leases" / "gpu"), settings=settings)


def reference_spec(tmp_path: Path, **settings) -> LaneSpec:
    phases = settings.pop("phases", ())
    return LaneSpec(name="cpu-reference", kind="cpu-reference", host="local", model=str(reference_model()),
                    phases=tuple(phases), lease_path=str(tmp_path / "leases" / "gpu"), settings=settings)
