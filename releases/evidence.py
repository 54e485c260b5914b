"""Lane evidence: the receipts a lane wrote elsewhere (a GPU host with no Prefect), checked before a
release binds them.

Evidence is the `receipts/` folder of `python -m gates.qualify --out DIR` (docs/LANES.md, Lane
evidence): the lane receipt, the phase receipts it binds by sha256, and the judged gates'
`verdict-*` receipts, all signed with the lane host's own key. It is bound to the wheel by sha256,
not to a candidate: it holds for every candidate whose reproducible build yields those bytes.

check_evidence says whether evidence is sound (every signature under the lane's pinned key, every
phase of the chain present, bound and passed, one wheel throughout); require_wheel whether it is
about a given wheel. A sound evidence of another wheel is what makes a lane hardware-pending; an
unsound one is refused. The chain and the verdict kinds are the caller's (gates/ knows them):
releases/ imports no other folder."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases.atomic import write_atomic
from releases.canonical import load_json_bytes, sha256_hex
from releases.errors import ReleaseError
from releases.gpu_names import gpu_named
from releases.keys import key_id
from releases.receipts import open_receipt

RECEIPTS = "receipts"
MAX_FILE_BYTES = 16 << 20   # a receipt is a few kilobytes; anything this large is not one


class EvidenceRefused(ReleaseError):
    """Lane evidence that must not be bound; `.problems` lists every reason, each naming its file."""

    def __init__(self, lane: str, problems: list[str]) -> None:
        self.lane, self.problems = lane, list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems[:20])
        more = f"\n  ... and {len(self.problems) - 20} more" if len(self.problems) > 20 else ""
        super().__init__(f"evidence for lane {lane} refused ({len(self.problems)} problem(s)):\n{lines}{more}")


@dataclass
class Evidence:
    """Sound evidence of one lane: what it qualifies and the envelopes to stage, in order (phases,
    the lane receipt, the verdicts), each as (kind, label, relative path, envelope)."""
    lane: str
    kind: str
    wheel: dict                      # {"name", "sha256"}: the wheel the lane qualified
    candidate: dict                  # the candidate reference the lane ran for (information only)
    key_id: str                      # the lane key every receipt verified under
    receipts: list[tuple[str, str, str, dict]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)   # relative path -> bytes, as read

    def summary(self) -> dict:
        return {"lane": self.lane, "kind": self.kind, "wheel": dict(self.wheel), "candidate": dict(self.candidate),
                "key_id": self.key_id, "receipts": [{"kind": k, "label": lbl, "path": p} for k, lbl, p, _ in self.receipts]}


def lane_file(lane: str) -> str:
    return f"{RECEIPTS}/lane/{lane}.dsse.json"


def verdict_file(verdict_kind: str, lane: str) -> str:
    return f"{RECEIPTS}/{verdict_kind}/{lane}.dsse.json"


def _is_lanes(rel: str, lane: str) -> bool:
    """Whether a path under receipts/ belongs to LANE (an evidence folder may hold several lanes)."""
    parts = PurePosixPath(rel).parts
    if len(parts) < 3 or parts[0] != RECEIPTS:
        return False
    if parts[1] == "phase":
        return parts[2] == lane
    return len(parts) == 3 and parts[2] == f"{lane}.dsse.json"


def read_lane_files(root: str | Path, lane: str) -> dict[str, bytes]:
    """The files of lane LANE under ROOT/receipts (relative path -> bytes). Nothing outside
    receipts/ is read. A link or special file there is refused (EvidenceRefused): evidence is
    plain files."""
    root = Path(root)
    base = root / RECEIPTS
    if not base.is_dir():
        raise EvidenceRefused(lane, [f"{RECEIPTS}/: no such folder in the evidence directory {root.name!r}"])
    files: dict[str, bytes] = {}
    problems: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        for name in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if not _is_lanes(rel, lane):
                continue
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                problems.append(f"{rel}: not a plain file (evidence holds plain files only)")
            elif st.st_size > MAX_FILE_BYTES:
                problems.append(f"{rel}: {st.st_size} bytes, larger than a receipt may be")
            else:
                files[rel] = path.read_bytes()
    if problems:
        raise EvidenceRefused(lane, problems)
    return files


def check_evidence(files: dict[str, bytes], *, lane: str, kind: str, chain: tuple[str, ...] | list[str],
                   verdict_kinds: tuple[str, ...] | list[str], key: Ed25519PublicKey,
                   gpu: str | None = None) -> Evidence:
    """Check that FILES (read_lane_files) are sound evidence of lane LANE of kind KIND: every
    receipt verifies under KEY (the lane's pinned key); the lane receipt's phases are exactly CHAIN,
    in order, all passed, each with the phase receipt of the sha256 it binds; each of VERDICT_KINDS
    has a passing receipt; every receipt names this lane and kind and the one wheel; when the lane
    names its GPU, its preflight saw that GPU on the host; no file is left unbound. Returns the
    Evidence, or raises EvidenceRefused listing every problem."""
    problems: list[str] = []
    kid = key_id(key)
    lane_path = lane_file(lane)
    if lane_path not in files:
        raise EvidenceRefused(lane, [f"{lane_path}: missing (found: {sorted(files) or 'no file of this lane'})"])
    opened = _open(files[lane_path], "lane", lane_path, key, kid, problems)
    if opened is None:
        raise EvidenceRefused(lane, problems)
    stmt, record = opened
    wheel, candidate = record["artifact"], record["candidate"]
    _same(stmt, record, lane=lane, kind=kind, wheel=wheel, candidate=candidate, where=lane_path, problems=problems)
    if record["verdict"] != "pass":
        problems.append(f"{lane_path}: the lane's verdict is {record['verdict']}, not pass")
    names = [p["name"] for p in record["phases"]]
    if names != list(chain):
        missing = [p for p in chain if p not in names]
        problems.append(f"{lane_path}: phases {names} are not the lane's chain {list(chain)}"
                        + (f" (missing: {', '.join(missing)})" if missing else ""))
    for p in record["phases"]:
        if p["status"] != "pass":
            problems.append(f"{lane_path}: phase {p['name']} is {p['status']}, not pass")
    status = {p["name"]: p["status"] for p in record["phases"]}
    if gpu:
        seen = preflight_gpu_names(record["phases"])
        if not any(gpu_named(gpu, name) for name in seen):
            problems.append(f"{lane_path}: the lane names GPU {gpu!r}, but its preflight saw "
                            f"{', '.join(seen) or 'no GPU'} on the host")

    out = Evidence(lane=lane, kind=kind, wheel=dict(wheel), candidate=dict(candidate), key_id=kid, files=dict(files))
    bound = {lane_path}
    bound_phases = []
    for i, entry in enumerate(record.get("phase_receipts", [])):
        path, phase = entry["path"], entry["phase"]
        bound.add(path)
        bound_phases.append(phase)
        if path != f"{RECEIPTS}/phase/{lane}/{phase}.dsse.json":
            problems.append(f"{lane_path}: phase_receipts/{i} binds {path}, not this lane's receipt of {phase}")
            continue
        if path not in files:
            problems.append(f"{path}: missing (the lane receipt binds it)")
            continue
        actual = sha256_hex(files[path])
        if actual != entry["sha256"]:
            problems.append(f"{path}: sha256 {actual} is not the {entry['sha256']} the lane receipt binds")
            continue
        phase_opened = _open(files[path], "phase", path, key, kid, problems)
        if phase_opened is None:
            continue
        phase_stmt, predicate = phase_opened
        _same(phase_stmt, predicate, lane=lane, kind=kind, wheel=wheel, candidate=candidate, where=path, problems=problems)
        found = (predicate["phase"], predicate["label"], predicate["status"])
        if found != (phase, entry["label"], status.get(phase)):
            problems.append(f"{path}: phase, label and status {found} are not what the lane receipt records "
                            f"{(phase, entry['label'], status.get(phase))}")
        out.receipts.append(("phase", entry["label"], path, load_json_bytes(files[path], where=path)))
    if "phase_receipts" not in record or bound_phases != names:
        problems.append(f"{lane_path}: it binds receipts of {bound_phases}, not one for each phase {names}")
    out.receipts.append(("lane", lane, lane_path, load_json_bytes(files[lane_path], where=lane_path)))

    for vkind in verdict_kinds:
        path = verdict_file(vkind, lane)
        bound.add(path)
        if path not in files:
            problems.append(f"{path}: missing (the lane declares judged gates)")
            continue
        v_opened = _open(files[path], vkind, path, key, kid, problems)
        if v_opened is None:
            continue
        v_stmt, verdict = v_opened
        first = v_stmt["subject"][0] if v_stmt["subject"] else {}
        if first.get("digest", {}).get("sha256") != wheel["sha256"]:
            problems.append(f"{path}: its candidate wheel {first.get('digest', {}).get('sha256')} is not the lane's "
                            f"{wheel['sha256']}")
        if "candidate" in verdict and verdict["candidate"] != candidate:
            problems.append(f"{path}: names candidate {verdict['candidate'].get('id')}, the lane receipt "
                            f"{candidate.get('id')}")
        if verdict["verdict"] != "pass":
            problems.append(f"{path}: the verdict is {verdict['verdict']}, not pass")
        out.receipts.append((vkind, lane, path, load_json_bytes(files[path], where=path)))

    unbound = sorted(set(files) - bound)
    if unbound:
        problems.append(f"files of lane {lane} that no receipt binds: {', '.join(unbound)}")
    if problems:
        raise EvidenceRefused(lane, problems)
    out.files = {rel: files[rel] for rel in sorted(bound)}
    return out


def require_wheel(evidence: Evidence, sha256: str, name: str | None = None) -> None:
    """Refuse (EvidenceRefused) evidence that qualified another wheel than sha256 (NAME, when given)."""
    if evidence.wheel["sha256"] != sha256:
        what = f"{name} " if name else ""
        raise EvidenceRefused(evidence.lane, [
            f"{lane_file(evidence.lane)}: the evidence qualifies wheel {evidence.wheel['name']} sha256 "
            f"{evidence.wheel['sha256']}, the candidate's wheel {what}is sha256 {sha256}"])


def store_evidence(evidence: Evidence, dest: str | Path) -> list[Path]:
    """Write the evidence's files under DEST (receipts/...), atomically, as they were read."""
    written = []
    for rel, data in evidence.files.items():
        path = Path(dest) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        written.append(path)
    return written


def preflight_gpu_names(phases: list[dict]) -> list[str]:
    """The GPU names the lane's preflight recorded; whatever else stands there names none."""
    gpus = next((p["facts"].get("gpus") for p in phases if p["name"] == "preflight"), None)
    return [g["name"] for g in gpus if isinstance(g, dict) and isinstance(g.get("name"), str)] \
        if isinstance(gpus, list) else []


def _open(data: bytes, kind: str, where: str, key: Ed25519PublicKey, kid: str, problems: list[str]):
    try:
        return open_receipt(load_json_bytes(data, where=where), key, kind, where=where)
    except ReleaseError as exc:
        message = getattr(exc, "message", str(exc))
        if "signature" in message:
            message = f"{message} (the lane's pinned key is {kid}): signed by another key, or altered"
        problems.append(f"{where}: {message}")
        return None


def _same(stmt: dict, record: dict, *, lane: str, kind: str, wheel: dict, candidate: dict, where: str,
          problems: list[str]) -> None:
    want = [{"name": wheel["name"], "digest": {"sha256": wheel["sha256"]}}]
    if stmt["subject"] != want:
        problems.append(f"{where}: subject {stmt['subject']} is not the lane's wheel {want}")
    if record.get("artifact") != wheel:
        problems.append(f"{where}: artifact {record.get('artifact')} is not the lane's wheel {wheel}")
    if record.get("candidate") != candidate:
        problems.append(f"{where}: names candidate {record.get('candidate')}, the lane receipt {candidate}")
    if (record.get("lane"), record.get("kind")) != (lane, kind):
        problems.append(f"{where}: lane {record.get('lane')!r} kind {record.get('kind')!r}, expected {lane!r} {kind!r}")
