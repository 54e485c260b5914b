"""Lane evidence for the release run and for `assay lanes import`: where a lane's evidence lies,
what it is checked against (the lane's pinned key, its kind's chain, the judged verdicts when the
lane declares gates), and whether it qualifies the candidate's wheel bytes (`bound`) or other bytes
(`hardware-pending`). Plain functions; the Prefect task is flows/steps.py: bind_lane_evidence.

A lane's evidence is its configured `evidence` folder plus whatever `assay lanes import` stored
for it under <state>/evidence/<lane>/<wheel sha256>/. Every folder must be sound: evidence that
does not verify is refused (the run fails), never taken for pending."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from builders import kernels, recipe, snapshot
from flows.config import Config, ConfigError, Lane
from gates.judged.run import KINDS as VERDICT_KINDS
from hosts.local import LocalHost
from releases.canonical import file_sha256
from releases.evidence import Evidence, EvidenceRefused, check_evidence, read_lane_files, require_wheel, store_evidence
from releases.keys import load_public_key

BOUND, PENDING = "bound", "hardware-pending"


def evidence_lane(cfg: Config, name: str) -> Lane:
    """The lane NAME, which must declare `evidence` (and so a pinned key); else ConfigError."""
    lane = cfg.lane(name)
    if not lane.evidence:
        raise ConfigError(cfg.file, f"lanes/{name}/evidence", f"lane {name!r} declares no `evidence` folder; only an "
                          "evidence lane takes imported evidence (docs/LANES.md, Lane evidence)")
    return lane


def check_dir(cfg: Config, lane: Lane, directory: str | Path) -> Evidence:
    """The sound evidence of LANE in DIRECTORY (its receipts/), or EvidenceRefused."""
    spec = cfg.lane_spec(lane.name)
    # A cpu kind's `gpu` names only the slot it holds: its preflight checks no GPU, nor does this.
    return check_evidence(read_lane_files(directory, lane.name), lane=lane.name, kind=lane.kind,
                          chain=spec.chain, verdict_kinds=VERDICT_KINDS if lane.gates else (),
                          key=load_public_key(lane.public_key),
                          gpu=lane.gpu if spec.lane_kind.device == "cuda" else None)


def folders(cfg: Config, lane: Lane) -> list[Path]:
    """The configured evidence folder, then every imported one (by wheel digest)."""
    imported = cfg.evidence_dir / lane.name
    return [Path(lane.evidence)] + (sorted(p for p in imported.iterdir() if p.is_dir()) if imported.is_dir() else [])


def resolve(cfg: Config, lane: Lane, wheel_sha256: str) -> tuple[str, Evidence]:
    """(BOUND, the evidence of these wheel bytes) or (PENDING, the configured evidence, of other
    bytes). Unsound evidence in any folder is EvidenceRefused."""
    found = [check_dir(cfg, lane, folder) for folder in folders(cfg, lane)]
    for evidence in found:
        if evidence.wheel["sha256"] == wheel_sha256:
            return BOUND, evidence
    return PENDING, found[0]


def pending_reason(evidence: Evidence, wheel: Path) -> str:
    return (f"its evidence qualifies wheel {evidence.wheel['name']} sha256 {evidence.wheel['sha256']}; this "
            f"candidate's wheel {wheel.name} is sha256 {file_sha256(wheel)}: run the lane on its host for these "
            "bytes and import the result (docs/LANES.md, Lane evidence)")


def build_candidate_wheel(cfg: Config, ref: str, dest: str | Path, progress=None, *,
                          kernels_step: bool = True) -> tuple[dict, Path]:
    """(candidate record, wheel path in DEST) of REF, built once here with the release recipe: the
    bytes the release run would build (it proves them identical twice). The build's AOT kernels
    artifact, when it makes one, is copied into DEST beside the wheel; KERNELS_STEP=False builds
    the wheel only."""
    candidate = snapshot.freeze(cfg.source, ref=ref, subdir=cfg.subdir, version_label=cfg.version_label)
    with tempfile.TemporaryDirectory(prefix="assay-candidate-wheel-") as tmp:
        source = snapshot.export_source(cfg.source, candidate, Path(tmp) / "source")
        result = recipe.build(LocalHost("local"), candidate, source, "a", str(Path(tmp) / "build"),
                              python=cfg.build_pythons[0], timeout=cfg.build_timeout_s, progress=progress,
                              kernel_archs=cfg.kernel_archs, kernels_step=kernels_step)
        wheel = next(p for p in result.artifacts if p.suffix == ".whl")
        Path(dest).mkdir(parents=True, exist_ok=True)
        for tar in (p for p in result.artifacts if p.name.endswith(kernels.SUFFIX)):
            shutil.copy2(tar, Path(dest) / tar.name)   # beside the wheel, where a lane's install finds it
        return candidate, Path(shutil.copy2(wheel, Path(dest) / wheel.name))


def candidate_wheel_sha256(cfg: Config, ref: str, progress=None) -> tuple[str, str]:
    """(wheel name, sha256) of REF's candidate wheel (build_candidate_wheel, without the kernels
    step: the digest is the wheel's alone)."""
    with tempfile.TemporaryDirectory(prefix="assay-lanes-import-") as tmp:
        _, wheel = build_candidate_wheel(cfg, ref, tmp, progress, kernels_step=False)
        return wheel.name, file_sha256(wheel)


def import_dir(cfg: Config, lane: Lane, directory: str | Path, wheel_sha256: str, *,
               dry_run: bool) -> tuple[Evidence, Path | None]:
    """Check DIRECTORY as LANE's evidence of the wheel WHEEL_SHA256; unless DRY_RUN store it where
    the release run finds it. Returns the evidence and where it was stored; EvidenceRefused."""
    evidence = check_dir(cfg, lane, directory)
    require_wheel(evidence, wheel_sha256)
    if dry_run:
        return evidence, None
    dest = cfg.evidence_dir / lane.name / wheel_sha256
    store_evidence(evidence, dest)
    return evidence, dest


__all__ = ["BOUND", "PENDING", "EvidenceRefused", "evidence_lane", "check_dir", "resolve", "import_dir",
           "candidate_wheel_sha256", "pending_reason"]
