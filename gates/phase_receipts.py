"""The signed receipts a lane writes into its output directory: one `phase` receipt per phase
that ran (label `<lane>/<phase>`) and one `lane` receipt binding them by digest.

Files: receipts/phase/<lane>/<phase>.dsse.json and receipts/lane/<lane>.dsse.json, the release
directory's own layout (a folder per kind, the label as the path below it), so that a stager adds
each envelope as it is and the paths in the lane receipt stay true there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gates.phases import PhaseOutcome
from gates.public import host_paths
from releases.atomic import write_atomic
from releases.canonical import canonical_json, load_json_bytes, sha256_hex
from releases.errors import RecordError, ReleaseError
from releases.receipts import open_receipt, sign_receipt

RECEIPTS = "receipts"


def phase_file(lane: str, phase: str) -> str:
    return f"{RECEIPTS}/phase/{lane}/{phase}.dsse.json"


def lane_file(lane: str) -> str:
    return f"{RECEIPTS}/lane/{lane}.dsse.json"


@dataclass(frozen=True)
class Written:
    kind: str
    label: str
    path: Path          # the envelope file
    relpath: str        # relative to the output directory
    sha256: str         # of the envelope file's bytes (canonical JSON)


class ReceiptWriter:
    def __init__(self, out_dir: Path, private_key: Ed25519PrivateKey, *, candidate: dict, lane: str, kind: str,
                 host: str, artifact: dict, run_id: str):
        self.out_dir = Path(out_dir)
        self.key = private_key
        self.candidate, self.lane, self.kind, self.host, self.artifact = candidate, lane, kind, host, artifact
        self.run_id = run_id

    @property
    def subjects(self) -> list[dict]:
        return [{"name": self.artifact["name"], "digest": {"sha256": self.artifact["sha256"]}}]

    def _write(self, kind: str, label: str, relpath: str, predicate: dict) -> Written:
        leaks = host_paths(predicate)
        if leaks:
            raise RecordError(f"a {kind} record would publish host paths at {', '.join(leaks[:5])}", where=label)
        envelope = sign_receipt(kind, self.subjects, predicate, self.key)
        data = canonical_json(envelope)
        path = self.out_dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        return Written(kind, label, path, relpath, sha256_hex(data))

    def write_phase(self, outcome: PhaseOutcome) -> Written:
        label = f"{self.lane}/{outcome.name}"
        predicate = {"candidate": self.candidate, "lane": self.lane, "kind": self.kind, "phase": outcome.name,
                     "label": label, "host": self.host, "artifact": self.artifact, "status": outcome.status,
                     "started_at": outcome.started_at, "ended_at": outcome.ended_at, "run_id": self.run_id,
                     "facts": outcome.facts}
        return self._write("phase", label, phase_file(self.lane, outcome.name), predicate)

    def write_lane(self, record: dict) -> Written:
        return self._write("lane", self.lane, lane_file(self.lane), record)

    def passed(self, phase: str) -> tuple[PhaseOutcome, Written] | None:
        """The passed receipt of `phase` for this candidate, artifact and lane, if one verifies."""
        rel = phase_file(self.lane, phase)
        path = self.out_dir / rel
        if not path.is_file():
            return None
        data = path.read_bytes()
        try:
            _, predicate = open_receipt(load_json_bytes(data, where=rel), self.key.public_key(), "phase", where=rel)
        except ReleaseError:
            return None   # unsigned by this key, malformed or tampered: the phase runs again
        same = (predicate["candidate"] == self.candidate and predicate["artifact"] == self.artifact
                and predicate["lane"] == self.lane and predicate["phase"] == phase and predicate["kind"] == self.kind)
        if not same or predicate["status"] != "pass":
            return None
        outcome = PhaseOutcome(phase, "pass", predicate["started_at"], predicate["ended_at"], predicate["facts"])
        return outcome, Written("phase", predicate["label"], path, rel, sha256_hex(data))

    def clear(self) -> None:
        """Remove this lane's receipts before a fresh (not resumed) run."""
        folder = self.out_dir / RECEIPTS / "phase" / self.lane
        for path in list(folder.glob("*.dsse.json")) + [self.out_dir / lane_file(self.lane)]:
            if path.exists():
                path.unlink()


def entry(written: Written) -> dict[str, Any]:
    return {"phase": written.label.split("/", 1)[1], "label": written.label, "path": written.relpath,
            "sha256": written.sha256}
