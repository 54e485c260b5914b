"""The lane entry flows/ calls today: `run_lane(...)` returns the lane record and leaves the
signing of the lane receipt to its caller. It runs the native chain of gates/qualify.py (phase
receipts signed with a key kept in `state_dir`), and returns the lane record without the
phase_receipts list, whose files stay in `state_dir`. New callers use gates.qualify.qualify()."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gates.qualify import qualify_ref
from gates.spec import LaneSpec
from releases.keys import ensure_local_key, load_private_key

Progress = Callable[[str], None]


def run_lane(host, lane: str, kind: str, candidate: dict, version: str, wheel: Path, *, workdir: str,
             base_python: str, lease_path: str, model: str | None = None, progress: Progress | None = None,
             state_dir: Path | None = None, run_id: str | None = None) -> dict:
    """Run lane `lane` of kind `kind` for `candidate` (a candidate ref) on `host`; return its record.
    `run_id` is accepted for the callers of the earlier signature; qualify names its own runs."""
    out_dir = Path(state_dir or workdir)
    spec = LaneSpec(name=lane, kind=kind, host=host.name, model=model, python=base_python, lease_path=lease_path)
    key_path, _ = ensure_local_key(out_dir / "keys")
    result = qualify_ref(host, spec, candidate, version, Path(wheel), out_dir, key=load_private_key(key_path),
                         progress=progress, workdir=str(Path(workdir) / "window"), base_python=base_python,
                         lease_path=lease_path)
    record = dict(result.record)
    record.pop("phase_receipts", None)
    return record
