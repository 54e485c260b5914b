"""The lane window: the independent audit's first look, the GPU-owner lease, a host snapshot
before, and on close the restore, the release of the lease and the window's hold time.

A window's state (run id, snapshot, the audit's first look) is kept in a private state file as
soon as it opens, so that a run killed mid-window can be resumed: the next window reuses the
first one's snapshot, puts the host back as the first run found it (its engine stopped), and is
audited against the first look."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from hosts import audit
from hosts.errors import LeaseHeld, RestoreIncomplete
from hosts.lease import Lease, lease_state
from hosts.snapshot import SnapshotSpec, discard, restore, snapshot_from_dict, snapshot_to_dict, take_snapshot


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class LaneWindow:
    def __init__(self, host, *, lane: str, run_id: str, lease_path: str, workdir: str, state_file: Path | None = None,
                 stale_after: float = 120.0, resume: bool = False, progress: Callable[[str], None] | None = None):
        self.host, self.lane, self.run_id, self.workdir = host, lane, run_id, workdir.rstrip("/")
        self.say = progress or (lambda message: None)
        self.lease_path = lease_path
        self.lease = Lease(host, lease_path, run_id=run_id, stale_after=stale_after,
                           heartbeat_interval=min(15.0, stale_after / 3))
        # Only processes of this window count: a pattern over the lane's working directory, so
        # that a restore never touches another user's engine on a shared host.
        self.spec = SnapshotSpec(process_pattern=re.escape(self.workdir), lease_path=lease_path)
        self.state_file = Path(state_file) if state_file else None
        self.resume = resume
        self.before = None
        self.audit_before: dict[str, Any] | None = None
        self.resumed_cleanup: list[str] = []
        self.diff: list[str] = []
        self.restored = False
        self.opened_at = self.closed_at = None
        self._held_from = self._held_until = None

    # -- open ------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        return audit.observe(self.host, marker=self.workdir, paths={"workdir": self.workdir}, lease_path=self.lease_path)

    def _persisted(self) -> dict[str, Any] | None:
        if self.resume and self.state_file and self.state_file.exists():
            return json.loads(self.state_file.read_text())
        return None

    def _acquire(self) -> None:
        """Take the lease; a resumed run waits out its own crashed holder's staleness once."""
        try:
            self.lease.acquire()
        except LeaseHeld as held:
            holder = held.holder if isinstance(held.holder, dict) else {}
            if not self.resume or holder.get("run_id") != self.run_id:
                raise
            self.say(f"lease held by this run's crashed holder; waiting {self.lease.stale_after:g}s for it to go stale")
            time.sleep(self.lease.stale_after + 1)
            self.lease.acquire()

    def open(self) -> "LaneWindow":
        self.opened_at = _now()
        persisted = self._persisted()
        if not persisted:
            broke = self.lease.clear_stale()   # a dead run's lease is not the host as found
            if broke:
                self.say(f"broke the stale lease of {(broke['stale_holder'] or {}).get('run_id', 'an unknown holder')}: "
                         f"{broke['reason']}")
        self.audit_before = persisted["audit_before"] if persisted else self.observe()
        self._acquire()
        self._held_from = time.monotonic()
        self.say(f"lease held on {self.host.name}")
        try:
            if persisted:
                self.before = snapshot_from_dict(persisted["before"])
                self.before.lease = lease_state(self.host, self.lease_path)   # the lease is ours again
                try:
                    restore(self.host, self.before, self.spec)
                except RestoreIncomplete as incomplete:
                    self.resumed_cleanup = list(incomplete.remaining)
                self.say("resumed: the crashed run's processes are stopped")
            else:
                self.before = take_snapshot(self.host, self.spec)
            self._save_state()
        except BaseException:
            self.lease.release()
            raise
        return self

    def _save_state(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run_id": self.run_id, "before": snapshot_to_dict(self.before),
                                   "audit_before": self.audit_before}, sort_keys=True))
        os.replace(tmp, self.state_file)

    def lease_holder(self) -> str | None:
        """The run id holding the lease now, when it is this window's own token."""
        state = lease_state(self.host, self.lease_path) or {}
        return state.get("run_id") if state.get("token") == self.lease.token else None

    # -- close -----------------------------------------------------------------------------
    def close(self) -> dict[str, Any]:
        """Restore the host, remove the lane's working directory, release the lease. Never raises
        for a failed restore: it is recorded, and the audit judges it."""
        error = None
        try:
            self.diff = restore(self.host, self.before, self.spec)
        except RestoreIncomplete as incomplete:
            self.diff = list(incomplete.remaining)
        except Exception as failure:  # recorded; the audit still runs
            error = f"restore failed: {type(failure).__name__}: {failure}"
            self.diff = [error]
        try:
            self.host.remove(self.workdir)
        except Exception as failure:
            self.diff.append(f"working directory not removed: {type(failure).__name__}")
        self.restored = not self.diff
        self.say("host restored as found" if self.restored else f"restore INCOMPLETE: {self.diff}")
        try:
            discard(self.host, self.before)
        finally:
            self.lease.release()
            self._held_until = time.monotonic()
            self.closed_at = _now()
        if self.state_file and self.state_file.exists():
            self.state_file.unlink()
        return {"restored": self.restored, "restore_diff": list(self.diff), "held_s": self.held_s}

    @property
    def held_s(self) -> float | None:
        if self._held_from is None:
            return None
        return round((self._held_until or time.monotonic()) - self._held_from, 3)

    def lease_record(self) -> dict[str, Any]:
        """What a public record says of the lease: its path only as a digest (no host paths)."""
        import hashlib
        return {"path_sha256": hashlib.sha256(self.lease_path.encode()).hexdigest(), "opened_at": self.opened_at,
                "closed_at": self.closed_at, "broke_stale": len(self.lease.broke)}
