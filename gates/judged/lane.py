"""The judged gates in a lane window: the candidate's wheel and the incumbent's, each installed in
an environment of its own and served on the same host and model, judged side by side, then both
engines stopped and the host restored and independently audited — always, as in every window.

`measure_lane` takes the measurements (the evidence a release flow may keep and reuse, by the
digests of what was measured); `judge_evidence` applies thresholds and waivers and signs. Each
verdict is signed as a receipt of its kind (`verdict-abba`, ...) labelled with the lane, whose
subjects are the two wheels by sha256; the verdicts name the incumbent's identity."""

from __future__ import annotations

import posixpath
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gates.judged.client import Endpoint
from gates.judged.identity import check_candidate_ref, check_incumbent
from gates.judged.run import KINDS, judge_measured, measure_judged
from gates.judged.waivers import blocks
from gates.places import default_lease_path, default_workdir
from gates.runtime import LaneRuntime
from gates.spec import LaneSpec
from gates.window import LaneWindow
from hosts import audit
from releases.atomic import write_atomic
from releases.canonical import canonical_json, file_sha256
from releases.receipts import sign_receipt, subject
from releases.release_dir import receipt_path


@dataclass
class JudgedLane:
    lane: str
    verdicts: dict[str, dict]                   # kind -> judged verdict record
    receipts: list[tuple[str, str, Path]]       # (kind, label, envelope path), in KINDS order
    window: dict                                # restored, restore_diff, held_s, audit {ok, checks}

    @property
    def blocking(self) -> list[dict]:
        """The verdicts that block the release (fail or inconclusive, not covered by waivers)."""
        return [v for v in self.verdicts.values() if blocks(v)]


def _served(rt: LaneRuntime, role: str) -> Endpoint:
    return Endpoint(role, rt.ensure_engine().base, rt.api_key())


def _restarter(rt: LaneRuntime, role: str) -> Callable[[], Endpoint]:
    def restart() -> Endpoint:  # a fresh server on the same state: checkpoints survive (docs/API.md)
        rt.stop_engine()
        return _served(rt, role)
    return restart


def measure_lane(host, spec: LaneSpec, version: str, wheel: Path, incumbent_wheel: Path, incumbent_identity: dict,
                 out_dir: Path, *, lane_gates: dict | None, base_python: str | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Serve the candidate and the incumbent in one window of the lane's host and measure the four
    gates; returns the evidence (gates.judged.run.measure_judged) with the window's outcome
    under "window" (restored, restore_diff, held_s, audit)."""
    say = progress or (lambda message: None)
    workdir = posixpath.join(default_workdir(host, spec, Path(out_dir)), "judged")
    python = base_python or spec.python or (sys.executable if type(host).__name__ == "LocalHost" else "python3")
    runtimes = {role: LaneRuntime(host=host, spec=spec, version=ver, wheel=Path(w), wheel_sha256=file_sha256(w),
                                  workdir=posixpath.join(workdir, role), base_python=python, say=say)
                for role, ver, w in (("candidate", version, wheel),
                                     ("incumbent", incumbent_identity["version"], incumbent_wheel))}
    window = LaneWindow(host, lane=spec.name, run_id=f"judged-{spec.name}-{uuid.uuid4().hex[:12]}", workdir=workdir,
                        lease_path=default_lease_path(host, spec), stale_after=spec.setting("lease_stale_s"),
                        progress=say)
    window.open()
    try:
        candidate, incumbent = (_served(runtimes[r], r) for r in ("candidate", "incumbent"))
        say(f"measuring {candidate.url} (candidate) against {incumbent.url} "
            f"(incumbent {incumbent_identity['version']})")
        evidence = measure_judged(candidate, incumbent, size=(lane_gates or {}).get("size", "cpu"),
                                  lane_gates=lane_gates,
                                  restart_candidate=_restarter(runtimes["candidate"], "candidate"),
                                  restart_incumbent=_restarter(runtimes["incumbent"], "incumbent"),
                                  progress=lambda text: say(f"gate {text}"))
    finally:
        for rt in runtimes.values():
            try:
                rt.stop_engine()
            except Exception as failure:  # the restore below stops what is left and the audit judges it
                say(f"stopping an engine failed: {type(failure).__name__}: {failure}")
        closed = window.close()
        checks = audit.compare(window.audit_before, window.observe())
        closed["audit"] = {"ok": audit.passed(checks), "checks": checks}
    return {**evidence, "window": closed}


def judge_evidence(evidence: dict, spec_name: str, candidate_ref: dict, wheel: Path, incumbent_wheel: Path,
                   incumbent_identity: dict, out_dir: Path, *, key: Ed25519PrivateKey, lane_gates: dict | None,
                   waivers: list[dict] = ()) -> JudgedLane:
    """Judge measured evidence with the lane's thresholds and the waivers; write the signed verdict
    receipts under `out_dir/receipts/`."""
    out_dir = Path(out_dir)
    verdicts = judge_measured(evidence, lane=spec_name, lane_gates=lane_gates, incumbent_identity=incumbent_identity,
                              candidate_ref=candidate_ref, waivers=list(waivers))
    subjects = [subject(Path(wheel).name, file_sha256(wheel)),
                subject(f"incumbent/{Path(incumbent_wheel).name}", incumbent_identity["wheel_sha256"])]
    written = []
    for kind in KINDS:
        path = out_dir / receipt_path(kind, spec_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, canonical_json(sign_receipt(kind, subjects, verdicts[kind], key)))
        written.append((kind, spec_name, path))
    return JudgedLane(spec_name, verdicts, written, evidence["window"])


def judge_lane(host, spec: LaneSpec, candidate_ref: dict, version: str, wheel: Path, incumbent_wheel: Path,
               incumbent_identity: dict, out_dir: Path, *, key: Ed25519PrivateKey, lane_gates: dict | None,
               waivers: list[dict] = (), base_python: str | None = None,
               progress: Callable[[str], None] | None = None) -> JudgedLane:
    """Run the four judged gates of lane `spec` for the candidate against the incumbent (measure, then
    judge); write the signed verdict receipts under `out_dir/receipts/`."""
    check_incumbent(incumbent_identity)  # bad input is refused before a window is opened
    check_candidate_ref(candidate_ref)
    evidence = measure_lane(host, spec, version, wheel, incumbent_wheel, incumbent_identity, out_dir,
                            lane_gates=lane_gates, base_python=base_python, progress=progress)
    return judge_evidence(evidence, spec.name, candidate_ref, wheel, incumbent_wheel, incumbent_identity, out_dir,
                          key=key, lane_gates=lane_gates, waivers=waivers)
