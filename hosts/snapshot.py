"""Host-state snapshot before a window, and restore after it, with a before/after diff. A
restore that cannot prove the host is back as found raises RestoreIncomplete."""
from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field

from hosts.errors import RestoreIncomplete
from hosts.lease import lease_state
from hosts.power import PowerControl


@dataclass
class SnapshotSpec:
    process_pattern: str = r"\bengine\b"          # regex over a process's command line
    files: list[str] = field(default_factory=list)  # chosen files: digested and saved
    lease_path: str | None = None
    save_dir: str = "/var/tmp/assay-snapshot"        # on the host: copies of the chosen files


@dataclass
class HostSnapshot:
    host: str
    taken_at: float
    processes: dict[int, str]
    ports: list[str]
    power_limits: dict[int, float | None]
    lease: dict | None
    files: dict[str, str | None]
    saved: dict[str, str] = field(default_factory=dict)


def _processes(host, pattern: str) -> dict[int, str]:
    # argv, not a shell string: no process of ours then carries the pattern in its command line.
    r = host.run(["ps", "-eo", "pid=,args="], timeout=60).check()
    rx = re.compile(pattern)
    out = {}
    for line in r.stdout.splitlines():
        pid, _, args = line.strip().partition(" ")
        if rx.search(args) and "@@ASSAY-PGID" not in args:
            out[int(pid)] = args.strip()
    return out


# Where a host has no `ss` (minimal images without iproute2): the TCP listeners of the given pids,
# from their socket inodes matched against /proc/net/tcp{,6}, printed in ss's two columns we read.
_PROC_PORTS = r"""
import os, sys
owners = {int(p) for p in sys.argv[1:]}
inodes = set()
for pid in owners:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        continue
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        cols = line.split()
        if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
            print(f"{table.rsplit('/', 1)[1]} *:{int(cols[1].rsplit(':', 1)[1], 16)}")
"""


def _ports(host, owners: set[int]) -> list[str]:
    """Listening sockets owned by the window's own processes (ss -p names the owner pids). Ports of
    unrelated processes come and go on a shared host and say nothing about this window."""
    if host.run("command -v ss >/dev/null 2>&1", timeout=60).exit_code != 0:
        r = host.run(["python3", "-c", _PROC_PORTS, *map(str, sorted(owners))], timeout=60).check()
        return sorted(set(r.stdout.split("\n")) - {""})
    r = host.run(["ss", "-H", "-ltnup"], timeout=60).check()
    ports = set()
    for line in r.stdout.splitlines():
        cols = line.split()
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if len(cols) >= 5 and pids & owners:
            ports.add(f"{cols[0]} {cols[4]}")
    return sorted(ports)


def _digests(host, paths: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in paths:
        r = host.run(f"[ -f {shlex.quote(p)} ] || exit 3; sha256sum -- {shlex.quote(p)}", timeout=600)
        out[p] = r.stdout.split()[0] if r.exit_code == 0 else None
    return out


def take_snapshot(host, spec: SnapshotSpec, power: PowerControl | None = None, *, save: bool = True) -> HostSnapshot:
    power = power or PowerControl(host)
    processes = _processes(host, spec.process_pattern)
    snap = HostSnapshot(host=host.name, taken_at=time.time(), processes=processes,
                        ports=_ports(host, set(processes)), power_limits=power.read_limits(),
                        lease=lease_state(host, spec.lease_path) if spec.lease_path else None,
                        files=_digests(host, spec.files))
    if save and spec.files:
        host.mkdir(spec.save_dir)
        for i, (path, digest) in enumerate(sorted(snap.files.items())):
            if digest is not None:
                copy = f"{spec.save_dir.rstrip('/')}/{i}-{digest}"
                host.run(["cp", "-a", "--", path, copy], timeout=600).check()
                snap.saved[path] = copy
    return snap


def diff(before: HostSnapshot, after: HostSnapshot) -> list[str]:
    out = []
    for pid in sorted(set(after.processes) - set(before.processes)):
        out.append(f"process started: {pid} {after.processes[pid]}")
    for pid in sorted(set(before.processes) - set(after.processes)):
        out.append(f"process gone: {pid} {before.processes[pid]}")
    out += [f"port opened: {p}" for p in sorted(set(after.ports) - set(before.ports))]
    out += [f"port closed: {p}" for p in sorted(set(before.ports) - set(after.ports))]
    for gpu in sorted(set(before.power_limits) | set(after.power_limits)):
        a, b = before.power_limits.get(gpu), after.power_limits.get(gpu)
        if a != b:
            out.append(f"power limit gpu{gpu}: {a} W -> {b} W")
    if _lease_id(before.lease) != _lease_id(after.lease):
        out.append(f"lease: {_lease_id(before.lease)} -> {_lease_id(after.lease)}")
    for path in sorted(set(before.files) | set(after.files)):
        if before.files.get(path) != after.files.get(path):
            out.append(f"file changed: {path} ({before.files.get(path)} -> {after.files.get(path)})")
    return out


def _lease_id(lease: dict | None) -> str | None:
    return None if lease is None else f"{lease.get('run_id')}/{lease.get('token')}"


def restore(host, before: HostSnapshot, spec: SnapshotSpec, power: PowerControl | None = None) -> list[str]:
    """Undo what changed since before; returns the (empty) remaining diff, or raises
    RestoreIncomplete with what could not be undone."""
    power = power or PowerControl(host)
    now = take_snapshot(host, spec, power, save=False)
    extra = sorted(set(now.processes) - set(before.processes))
    if extra:
        pids = " ".join(str(p) for p in extra)
        host.run(f"kill -TERM {pids} 2>/dev/null; i=0; while [ $i -lt 50 ]; do "
                 f"kill -0 {pids} 2>/dev/null || break; sleep 0.1; i=$((i+1)); done; kill -KILL {pids} 2>/dev/null; exit 0",
                 timeout=60)
    for path, digest in before.files.items():
        if now.files.get(path) == digest:
            continue
        if digest is None:
            host.remove(path)
        else:
            host.run(["cp", "-a", "--", before.saved[path], path], timeout=600).check()
    for gpu, watts in before.power_limits.items():
        if watts is not None and now.power_limits.get(gpu) != watts:
            power.set_limit(gpu, watts)
    remaining = diff(before, take_snapshot(host, spec, power, save=False))
    if remaining:
        raise RestoreIncomplete(host.name, remaining)
    return remaining


def discard(host, snap: HostSnapshot) -> None:
    """Remove the saved copies once a window is over."""
    for copy in snap.saved.values():
        host.remove(copy)


def snapshot_to_dict(snap: HostSnapshot) -> dict:
    """A JSON-able form, so that a window interrupted by a crash can be restored by the next run."""
    return {"host": snap.host, "taken_at": snap.taken_at, "processes": {str(k): v for k, v in snap.processes.items()},
            "ports": list(snap.ports), "power_limits": {str(k): v for k, v in snap.power_limits.items()},
            "lease": snap.lease, "files": dict(snap.files), "saved": dict(snap.saved)}


def snapshot_from_dict(data: dict) -> HostSnapshot:
    return HostSnapshot(host=data["host"], taken_at=data["taken_at"],
                        processes={int(k): v for k, v in data["processes"].items()}, ports=list(data["ports"]),
                        power_limits={int(k): v for k, v in data["power_limits"].items()}, lease=data["lease"],
                        files=dict(data["files"]), saved=dict(data.get("saved", {})))
