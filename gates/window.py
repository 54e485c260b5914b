"""The lane window: GPU-owner lease, host snapshot before, restore and audit after — always.

Entering takes the lease and records the host's state; leaving restores what the window changed,
diffs the host against the snapshot, and releases the lease in `finally`. A restore that cannot
prove the host is back as found is recorded as a failed `restore-audit` phase, never hidden."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from gates.phases import PhaseOutcome
from hosts.errors import RestoreIncomplete
from hosts.lease import Lease
from hosts.snapshot import SnapshotSpec, discard, restore, take_snapshot


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class LaneWindow:
    def __init__(self, host, *, lane: str, run_id: str, lease_path: str, process_pattern: str, watch_files=(),
                 progress: Callable[[str], None] | None = None):
        self.host, self.lane = host, lane
        self.say = progress or (lambda message: None)
        self.lease = Lease(host, lease_path, run_id=run_id)
        # Only processes of this window's own engine count: a pattern over the lane's working
        # directory, so that a restore never touches another user's engine on a shared host.
        self.spec = SnapshotSpec(process_pattern=process_pattern, files=list(watch_files), lease_path=lease_path)
        self.before = None
        self.diff: list[str] = []
        self.restored = False
        self.error: str | None = None
        self.opened_at = self.closed_at = None

    def __enter__(self) -> "LaneWindow":
        self.opened_at = _now()
        self.lease.acquire()
        self.say(f"lease {self.lease.path} held on {self.host.name}")
        try:
            self.before = take_snapshot(self.host, self.spec)
        except BaseException:
            self.lease.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self.diff = restore(self.host, self.before, self.spec)
            self.restored = not self.diff
            self.say("host restored as found" if self.restored else f"restore INCOMPLETE: {self.diff}")
        except RestoreIncomplete as incomplete:
            self.diff, self.restored = list(incomplete.remaining), False
            self.say(f"restore INCOMPLETE: {self.diff}")
        except Exception as failure:  # the audit must still be recorded; the phases' verdict stands
            self.error = f"restore failed: {failure}"
            self.diff, self.restored = [self.error], False
            self.say(self.error)
        finally:
            try:
                discard(self.host, self.before)
            finally:
                self.lease.release()
            self.closed_at = _now()
        return False

    def audit_outcome(self) -> PhaseOutcome:
        facts = {"restored": self.restored, "remaining_differences": len(self.diff)}
        if not self.restored:
            facts["reason"] = "the host could not be proven back as found"
        return PhaseOutcome("restore-audit", "pass" if self.restored else "fail", self.closed_at or _now(),
                            self.closed_at or _now(), facts)

    def record(self) -> dict:
        return {"lease": {"path": self.lease.path, "opened_at": self.opened_at, "closed_at": self.closed_at,
                          "broke_stale": len(self.lease.broke)},
                "restored": self.restored, "restore_diff": self.diff}
