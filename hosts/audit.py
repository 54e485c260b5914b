"""An independent audit of a host window: its own before/after observation, taken by code that
shares nothing with hosts/snapshot.py (which does the restoring), so that a restore is never
judged by the code that performed it.

Where snapshot.py lists processes with `ps` and ports with `ss`, the audit reads /proc itself
through one stdlib Python script run on the host: processes whose command line holds the
window's marker, the listening TCP sockets those processes own (socket inodes matched against
/proc/net/tcp{,6}), the existence and content digest of chosen paths, whether the lease
directory exists and whose it is, and GPU power limits and compute processes read with
nvidia-smi query flags (read only). `compare` turns two observations into named checks."""

from __future__ import annotations

import json
from typing import Any

# Runs on the host with its python3 (stdlib only). argv: marker, then JSON {role: path}, then lease path.
_OBSERVE = r'''
import hashlib, json, os, subprocess, sys
marker, paths, lease = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
me = {os.getpid(), os.getppid()}   # this script and the shell that may wrap it hold the marker
procs = {}
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) in me:
        continue
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        continue
    if marker in cmd:
        procs[int(pid)] = hashlib.sha256(cmd.encode()).hexdigest()
inodes = {}
for pid in procs:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    except OSError:
        pass
listening = []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for row in rows:
        cols = row.split()
        if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
            listening.append(f"{table.rsplit('/', 1)[1]} port {int(cols[1].rsplit(':', 1)[1], 16)}")
def digest(path):
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    if os.path.isfile(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(root, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, path)}\0{st.st_size}\0{st.st_mode:o}\n".encode())
    return "tree:" + h.hexdigest()
observed = {role: {"exists": os.path.lexists(p), "digest": digest(p) if os.path.lexists(p) else None}
            for role, p in sorted(paths.items())}
holder = None
if lease and os.path.isdir(lease):
    try:
        holder = json.load(open(os.path.join(lease, "holder.json"))).get("run_id")
    except (OSError, ValueError):
        holder = "unreadable"
power, apps = {}, []
try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,power.limit", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=60)
    for line in out.stdout.splitlines():
        index, _, value = line.partition(",")
        power[index.strip()] = value.strip()
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=60)
    apps = sorted(int(p) for p in out.stdout.split() if p.strip().isdigit() and int(p) in procs)
except (OSError, subprocess.SubprocessError):
    pass
print(json.dumps({"processes": {str(k): v for k, v in sorted(procs.items())}, "listening": sorted(set(listening)),
                  "paths": observed, "lease": {"exists": bool(lease) and os.path.isdir(lease), "holder_run_id": holder},
                  "power_limits": power, "gpu_processes": apps}, sort_keys=True))
'''


def observe(host, *, marker: str, paths: dict[str, str], lease_path: str | None = None,
            python: str = "python3") -> dict[str, Any]:
    """One observation of the host, as seen by the audit's own script."""
    r = host.run([python, "-c", _OBSERVE, marker, json.dumps(paths), lease_path or ""], timeout=300).check()
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(name: str, ok: bool, detail: str) -> dict[str, str]:
    return {"name": name, "status": "pass" if ok else "fail", "detail": detail}


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, str]]:
    """Every check of the window, each pass or fail, with a detail that names no host path."""
    checks = []
    left = sorted(set(after["processes"]) - set(before["processes"]), key=int)
    checks.append(_check("processes", not left, f"{len(left)} process(es) of the window still running"
                         if left else "no process of the window remains"))
    opened = sorted(set(after["listening"]) - set(before["listening"]))
    checks.append(_check("ports", not opened, ("still listening: " + ", ".join(opened)) if opened
                         else "no listening socket of the window remains"))
    for role in sorted(set(before["paths"]) | set(after["paths"])):
        a, b = before["paths"].get(role), after["paths"].get(role)
        same = a == b
        detail = ("as found" if same else
                  f"existed {a and a['exists']} -> {b and b['exists']}, content {'unchanged' if (a or {}).get('digest') == (b or {}).get('digest') else 'changed'}")
        checks.append(_check(f"path:{role}", same, detail))
    checks.append(_check("lease", before["lease"] == after["lease"],
                         f"lease {'held' if before['lease']['exists'] else 'free'} before, "
                         f"{'held' if after['lease']['exists'] else 'free'} after"))
    power_same = before["power_limits"] == after["power_limits"]
    checks.append(_check("power", power_same, "no GPU" if not before["power_limits"] and power_same else
                         ("power limits as found" if power_same else
                          f"power limits {before['power_limits']} -> {after['power_limits']}")))
    checks.append(_check("gpu-processes", not after["gpu_processes"],
                         f"{len(after['gpu_processes'])} GPU process(es) of the window" if after["gpu_processes"]
                         else "no GPU process of the window"))
    return checks


def passed(checks: list[dict[str, str]]) -> bool:
    return all(c["status"] == "pass" for c in checks)
