"""One lane window: lease the host's GPU owner lease, snapshot the host, run the lane's phase
chain, restore the host and audit the restore — the restore always runs, whatever the phases did.
The result is the lane record (docs/INTERFACES.md)."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Callable

from gates.phases import PhaseChain, PhaseOutcome, verdict_of
from gates.smoke import cpu_smoke_phases
from gates.window import LaneWindow
from releases.canonical import file_sha256

Progress = Callable[[str], None]


def _phases(kind: str, host, wheel: Path, workdir: str, base_python: str, version: str, model: str | None):
    if kind == "cpu-smoke":
        return cpu_smoke_phases(host, wheel, workdir, base_python, version)
    if kind == "cpu-reference":
        from gates.reference import cpu_reference_phases

        return cpu_reference_phases(host, wheel, workdir, base_python, version, model)
    raise ValueError(f"unknown lane kind {kind!r}; known: cpu-smoke, cpu-reference")


def run_lane(host, lane: str, kind: str, candidate: dict, version: str, wheel: Path, *, workdir: str,
             base_python: str, lease_path: str, model: str | None = None, progress: Progress | None = None,
             state_dir: Path | None = None, run_id: str | None = None) -> dict:
    """Run lane `lane` of kind `kind` for `candidate` (a candidate ref) on `host`; return its record.
    `run_id` names the lease holder (default: the lane and the candidate)."""
    say = progress or (lambda message: None)
    run_id = run_id or f"lane-{lane}-{candidate['id'][:12]}"
    remote_work = posixpath.join(workdir, "window")
    state_file = (state_dir or Path(workdir)) / f"phases-{lane}.json"
    outcomes: list[PhaseOutcome] = []
    window = LaneWindow(host, lane=lane, run_id=run_id, lease_path=lease_path,
                        process_pattern=re.escape(remote_work), progress=say)
    with window:
        chain = PhaseChain(state_file, key=f"{candidate['id']}:{lane}:{kind}", progress=say)
        outcomes = chain.run(_phases(kind, host, wheel, remote_work, base_python, version, model))
    audit = window.audit_outcome()
    outcomes.append(audit)
    return {
        "candidate": candidate,
        "lane": lane,
        "host": host.name,
        "artifact": {"name": Path(wheel).name, "sha256": file_sha256(wheel)},
        "verdict": verdict_of(outcomes),
        "phases": [o.as_record() for o in outcomes],
        "window": window.record(),
    }
