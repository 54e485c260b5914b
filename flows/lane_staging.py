"""The store's staging area for dispatched lanes, and the check of what a lane host sends back.

A lane dispatched to a worker on its host exchanges files through the release store, the one
place both machines can reach: the dispatching run puts the wheel at
`_staging/lanes/<run>/<lane>/wheel/<file>`; the worker puts the receipts its lane wrote at
`_staging/lanes/<run>/<lane>/<child run>/receipts/...` (the layout gates/phase_receipts.py writes,
so paths inside the lane receipt stay true). `_staging` is no release version (a leading `_` is not
PEP 440) and holds no manifest, so no reader takes it for a release; the store is write-once, so
an operator expires that prefix (an S3 lifecycle rule) instead of a run deleting it.

Nothing a worker sends back is trusted: `check_returned` opens every receipt with the expected
key and checks candidate, wheel, lane and the chain of phases before the stager binds any."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases.candidate import candidate_mismatch
from releases.canonical import load_json_bytes, sha256_hex
from releases.errors import ReleaseError
from releases.receipts import open_receipt

STAGING = "_staging/lanes"


def lane_prefix(run_id: str, lane: str) -> str:
    return f"{STAGING}/{run_id}/{lane}"


def wheel_key(run_id: str, lane: str, wheel_name: str) -> str:
    return f"{lane_prefix(run_id, lane)}/wheel/{wheel_name}"


def receipts_prefix(wheel_key_: str, child_run_id: str) -> str:
    """Where the worker of child run `child_run_id` puts its receipts: beside the wheel it was
    sent, under its own run id (a rerun never meets an earlier run's write-once objects)."""
    return f"{PurePosixPath(wheel_key_).parent.parent}/{child_run_id}"


def put_receipts(store, prefix: str, out_dir: Path, paths: list[Path]) -> list[str]:
    """Upload the lane's receipt files (paths under out_dir) to prefix/<path relative to out_dir>."""
    keys = []
    for path in paths:
        key = f"{prefix}/{Path(path).relative_to(out_dir).as_posix()}"
        store.put_file(key, path)
        keys.append(key)
    return keys


def read_returned(store, prefix: str) -> dict[str, bytes]:
    """Every object under prefix/, keyed by its path relative to prefix (receipts/...)."""
    return {key[len(prefix) + 1:]: store.read_bytes(key) for key in store.list(prefix + "/")}


@dataclass
class Returned:
    """What check_returned found: the receipts to stage, in order (phases, then the lane), the
    lane's verdict, and every reason to refuse them (none: they may be bound)."""
    receipts: list[tuple[str, str, dict]] = field(default_factory=list)   # (kind, label, envelope)
    verdict: str | None = None
    record: dict | None = None                                           # the lane receipt's predicate
    problems: list[str] = field(default_factory=list)


def check_returned(files: dict[str, bytes], *, lane: str, kind: str, chain: tuple[str, ...], candidate: dict,
                   wheel: dict, key: Ed25519PublicKey) -> Returned:
    """Check the files a lane host sent back for lane `lane` (kind `kind`, phases `chain`) of
    `candidate` (its reference) on `wheel` ({"name", "sha256"}): the lane receipt and every phase
    receipt it binds open with `key`, name this candidate, wheel, lane and kind, each phase file
    has the digest the lane receipt records, and the phases are exactly the chain, in order."""
    out = Returned()
    lane_path = f"receipts/lane/{lane}.dsse.json"
    if lane_path not in files:
        out.problems.append(f"no lane receipt {lane_path} came back (received: {sorted(files) or 'nothing'})")
        return out
    opened = _open(files[lane_path], "lane", lane_path, key, out.problems)
    if opened is None:
        return out
    stmt, record = opened
    _same_subjects(stmt, wheel, lane_path, out.problems)
    _same_lane(record, lane=lane, kind=kind, candidate=candidate, wheel=wheel, where=lane_path, problems=out.problems)
    names = [p.get("name") for p in record.get("phases", [])]
    if names != list(chain):
        out.problems.append(f"{lane_path}: phases {names} are not the lane's chain {list(chain)}")
    status = {p.get("name"): p.get("status") for p in record.get("phases", [])}
    expected_paths = {lane_path}
    for entry in record.get("phase_receipts", []):
        path, phase = entry["path"], entry["phase"]
        expected_paths.add(path)
        if path not in files:
            out.problems.append(f"phase receipt {path} (bound by the lane receipt) did not come back")
            continue
        if sha256_hex(files[path]) != entry["sha256"]:
            out.problems.append(f"{path}: sha256 {sha256_hex(files[path])} is not the {entry['sha256']} "
                                "the lane receipt binds")
            continue
        phase_opened = _open(files[path], "phase", path, key, out.problems)
        if phase_opened is None:
            continue
        phase_stmt, predicate = phase_opened
        _same_subjects(phase_stmt, wheel, path, out.problems)
        _same_lane(predicate, lane=lane, kind=kind, candidate=candidate, wheel=wheel, where=path, problems=out.problems)
        found = (predicate.get("phase"), predicate.get("label"), predicate.get("status"))
        if found != (phase, entry["label"], status.get(phase)):
            out.problems.append(f"{path}: phase, label and status {found} are not what the lane receipt records "
                                f"{(phase, entry['label'], status.get(phase))}")
        out.receipts.append(("phase", entry["label"], load_json_bytes(files[path], where=path)))
    # A phase skipped after an earlier one failed leaves no receipt; every other phase leaves one.
    ran = [n for n in names if status.get(n) != "skipped"]
    bound = [e["phase"] for e in record.get("phase_receipts", [])]
    if bound != ran:
        out.problems.append(f"{lane_path}: it binds receipts of {bound}, not one for each phase that ran {ran}")
    extra = sorted(set(files) - expected_paths)
    if extra:
        out.problems.append(f"files that no receipt binds came back: {extra}")
    out.receipts.append(("lane", lane, load_json_bytes(files[lane_path], where=lane_path)))
    out.verdict, out.record = record.get("verdict"), record
    return out


def _open(data: bytes, kind: str, where: str, key: Ed25519PublicKey, problems: list[str]):
    try:
        return open_receipt(load_json_bytes(data, where=where), key, kind, where=where)
    except ReleaseError as exc:
        problems.append(f"{where}: {exc}")
        return None


def _same_subjects(stmt: dict, wheel: dict, where: str, problems: list[str]) -> None:
    want = [{"name": wheel["name"], "digest": {"sha256": wheel["sha256"]}}]
    if stmt.get("subject") != want:
        problems.append(f"{where}: subject {stmt.get('subject')} is not the wheel sent ({want})")


def _same_lane(record: dict, *, lane: str, kind: str, candidate: dict, wheel: dict, where: str,
               problems: list[str]) -> None:
    mismatch = candidate_mismatch(record.get("candidate"), candidate)
    if mismatch:
        problems.append(f"{where}: {mismatch}")
    if record.get("artifact") != wheel:
        problems.append(f"{where}: artifact {record.get('artifact')} is not the wheel sent ({wheel})")
    if (record.get("lane"), record.get("kind")) != (lane, kind):
        problems.append(f"{where}: lane {record.get('lane')!r} kind {record.get('kind')!r}, expected {lane!r} {kind!r}")
