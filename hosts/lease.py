"""An exclusive GPU-owner lease on a host, created atomically on that host.

Layout on the host: the lease is the directory PATH (mkdir is atomic: one creator wins) holding
holder.json (written to a temporary name, then renamed). Its heartbeat is holder.json's mtime,
read and compared with the HOST's clock, so clocks of holders never matter. Breaks are appended
as JSON lines to PATH.breaks.log, beside the lease, which outlives it.

The rule for breaking a lease (nothing else breaks one):
  1. its heartbeat is older than `stale_after` seconds (host clock), AND
  2. its holder is provably gone:
     - the holder ran on this machine (same hostname): its pid no longer exists; or
     - the holder ran on the lease host itself: its pid no longer exists there; or
     - holder.json was never written (the holder died between mkdir and rename): the
       directory's own age counts as the heartbeat.
  A stale lease whose holder ran on a third machine cannot be proven gone from here: it raises
  LeaseHeld, and only an explicit `break_lease(...)` by a person removes it.
A breaker renames the lease aside (only one rename can succeed), checks that what it moved is the
stale lease it judged, records the break, then removes it.
"""
from __future__ import annotations

import json
import os
import shlex
import socket
import threading
import time
import uuid

from hosts.errors import HostError, LeaseHeld, LeaseLost

DEFAULT_PATH = "/var/lib/assay/leases/gpu"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    def __init__(self, host, path: str = DEFAULT_PATH, *, run_id: str, stale_after: float = 120.0,
                 heartbeat_interval: float = 15.0, holder_host: str | None = None, pid: int | None = None) -> None:
        if heartbeat_interval >= stale_after:
            raise ValueError(f"heartbeat_interval ({heartbeat_interval}) must be below stale_after ({stale_after})")
        self.host, self.path, self.run_id = host, path.rstrip("/"), run_id
        self.stale_after, self.heartbeat_interval = stale_after, heartbeat_interval
        self.holder_host = holder_host or socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.token = uuid.uuid4().hex
        self.holder: dict | None = None
        self.broke: list[dict] = []
        self.lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def file(self) -> str:
        return f"{self.path}/holder.json"

    @property
    def breaks_log(self) -> str:
        return f"{self.path}.breaks.log"

    def _sh(self, script: str, stdin: str | None = None):
        return self.host.run(script, timeout=60, stdin=stdin)

    # -- acquire / release ------------------------------------------------------------------
    def acquire(self) -> "Lease":
        self.host.mkdir(os.path.dirname(self.path) or "/")
        for _ in range(3):
            if self._sh(f"mkdir {shlex.quote(self.path)}").exit_code == 0:
                self._write_holder()
                self._thread = threading.Thread(target=self._beat, name=f"lease-{self.path}", daemon=True)
                self._thread.start()
                return self
            current = self._read_holder_settled()
            if current is None:
                continue  # released between our mkdir and our read: try again
            age, holder = current
            gone, why = self._holder_gone(age, holder)
            if not gone:
                raise LeaseHeld(holder or "an unknown holder", self.host.name, self.path, why)
            self._break(age, holder, why)
        raise LeaseHeld("contending holders", self.host.name, self.path, "could not acquire after 3 attempts")

    def clear_stale(self) -> dict | None:
        """Break the lease when, by the breaking rule, its holder is gone (recorded like any break);
        the break record, or None when the lease is free or its holder may still be alive. A lane
        window calls this before its audit's first look, so a dead run's lease is not part of the
        host "as found" (the window would otherwise be blamed for its disappearance)."""
        current = self._read_current()
        if current is None:
            return None
        age, holder = current
        gone, why = self._holder_gone(age, holder)
        if not gone:
            return None
        before = len(self.broke)
        self._break(age, holder, why)
        return self.broke[-1] if len(self.broke) > before else None

    def _write_holder(self) -> None:
        self.holder = {"run_id": self.run_id, "pid": self.pid, "holder_host": self.holder_host,
                       "token": self.token, "acquired_at": time.time()}
        tmp = f"{self.file}.{self.token}.tmp"
        self._sh(f"cat > {shlex.quote(tmp)} && mv {shlex.quote(tmp)} {shlex.quote(self.file)}",
                 stdin=json.dumps(self.holder, sort_keys=True)).check()

    def _read_holder_settled(self, settle_s: float = 5.0) -> tuple[float, dict | None] | None:
        """The current lease, waiting a moment for a holder that has made the directory but not
        yet renamed holder.json into it, so that contention names the real holder."""
        deadline = time.monotonic() + settle_s
        while True:
            current = self._read_current()
            if current is None or current[1] is not None or current[0] > settle_s or time.monotonic() > deadline:
                return current
            time.sleep(0.1)

    def _read_current(self) -> tuple[float, dict | None] | None:
        p, f = shlex.quote(self.path), shlex.quote(self.file)
        r = self._sh(f"[ -d {p} ] || exit 3; t={f}; [ -e {f} ] || t={p}; "
                     f"echo $(( $(date +%s) - $(stat -c %Y \"$t\") )); cat {f} 2>/dev/null; exit 0")
        if r.exit_code == 3:
            return None
        r.check()
        first, _, rest = r.stdout.partition("\n")
        try:
            holder = json.loads(rest) if rest.strip() else None
        except json.JSONDecodeError:
            holder = None  # a half-written file cannot happen (rename), but a foreign one can
        return float(first), holder

    def _holder_gone(self, age: float, holder: dict | None) -> tuple[bool, str]:
        if age <= self.stale_after:
            return False, f"heartbeat {age:.0f}s ago (stale after {self.stale_after:g}s)"
        if holder is None:
            return True, f"no holder record, lease directory {age:.0f}s old"
        pid, where = int(holder.get("pid", -1)), holder.get("holder_host")
        if where == socket.gethostname():
            return (not _pid_alive(pid)), f"holder pid {pid} on this machine " + ("gone" if not _pid_alive(pid) else "alive")
        host_name = self._sh("uname -n").stdout.strip()
        if where == host_name:
            alive = self._sh(f"kill -0 {pid}").exit_code == 0
            return (not alive), f"holder pid {pid} on the lease host " + ("alive" if alive else "gone")
        return False, (f"heartbeat stale ({age:.0f}s) but the holder ran on {where!r}, which cannot be "
                       "checked from here; break it explicitly with break_lease() if it is gone")

    def _break(self, age: float, holder: dict | None, why: str) -> None:
        aside = f"{self.path}.broken.{self.token}"
        if self._sh(f"mv -T {shlex.quote(self.path)} {shlex.quote(aside)}").exit_code != 0:
            return  # another breaker or the holder got there first; acquire() looks again
        moved = self._sh(f"cat {shlex.quote(aside)}/holder.json 2>/dev/null || true").stdout
        if holder is not None and holder.get("token") not in moved:
            # We moved a lease newer than the one we judged stale: put it back.
            self._sh(f"mv -T {shlex.quote(aside)} {shlex.quote(self.path)}").check()
            return
        record = {"broken_at": time.time(), "lease": self.path, "stale_holder": holder, "heartbeat_age_s": age,
                  "reason": why, "broken_by": {"run_id": self.run_id, "pid": self.pid, "holder_host": self.holder_host}}
        self.broke.append(record)
        append_break(self.host, self.breaks_log, record)
        self._sh(f"rm -rf {shlex.quote(aside)}").check()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.heartbeat_interval + 60)
        if self.holder is not None:
            self._sh(f"grep -q {self.token} {shlex.quote(self.file)} && rm -rf {shlex.quote(self.path)}; exit 0")
            self.holder = None

    def abandon(self) -> None:
        """Stop the heartbeat and keep the lease file, as a holder that died would: the lease goes
        stale and the next holder may break it (the breaking rule)."""
        self._stop.set()

    def __enter__(self) -> "Lease":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- heartbeat --------------------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            try:
                r = self._sh(f"grep -q {self.token} {shlex.quote(self.file)} && touch {shlex.quote(self.file)}")
            except HostError:
                continue  # unreachable for now; staleness is judged by others from the mtime
            if r.exit_code != 0:
                self.lost = LeaseLost(f"lease {self.path} on host {self.host.name!r} is no longer ours")
                return

    def check(self) -> None:
        """Raise LeaseLost if the lease was broken or taken over while held."""
        if self.lost is not None:
            raise self.lost


def append_break(host, log_path: str, record: dict) -> None:
    line = json.dumps(record, sort_keys=True) + "\n"
    host.run(f"cat >> {shlex.quote(log_path)}", stdin=line, timeout=60).check()


def read_breaks(host, log_path: str) -> list[dict]:
    r = host.run(f"cat {shlex.quote(log_path)} 2>/dev/null || true", timeout=60)
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]


def break_lease(host, path: str, *, by: str, reason: str) -> dict:
    """A person's explicit break of a lease that the rule above cannot break; recorded."""
    path = path.rstrip("/")
    r = host.run(f"cat {shlex.quote(path)}/holder.json 2>/dev/null || true", timeout=60)
    record = {"broken_at": time.time(), "lease": path, "stale_holder": r.stdout.strip() or None,
              "reason": f"explicit: {reason}", "broken_by": {"person": by}}
    append_break(host, f"{path}.breaks.log", record)
    host.run(["rm", "-rf", "--", path], timeout=60).check()
    return record


def lease_state(host, path: str = DEFAULT_PATH) -> dict | None:
    """The current holder record (None when free) — for snapshots."""
    r = host.run(f"cat {shlex.quote(path.rstrip('/'))}/holder.json 2>/dev/null || true", timeout=60)
    try:
        return json.loads(r.stdout) if r.stdout.strip() else None
    except json.JSONDecodeError:
        return {"unreadable": r.stdout[:200]}
