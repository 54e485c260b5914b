"""Who holds a TCP port: the listening sockets in /proc/net/tcp and tcp6, matched by inode to the
processes whose /proc/<pid>/fd link to them. A socket whose owner cannot be seen (another user's
process) is still reported, with pid None: the port is held all the same. A try-bind closes the
gap between reading /proc and starting the engine."""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass

_LISTEN = "0A"


@dataclass(frozen=True)
class Holder:
    pid: int | None
    cmdline: str


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                next(fh, None)
                for line in fh:
                    cols = line.split()
                    if len(cols) > 9 and cols[3] == _LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(cols[9])
        except FileNotFoundError:
            continue
    return inodes


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def holders(port: int) -> list[Holder]:
    """Every process listening on PORT (any address); pid None for a socket whose owner is hidden."""
    inodes = _listening_inodes(port)
    found: dict[str, Holder] = {}
    if inodes:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fds = os.listdir(f"/proc/{entry}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    link = os.readlink(f"/proc/{entry}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    found.setdefault(link[8:-1], Holder(int(entry), cmdline(int(entry))))
    return [found.get(i, Holder(None, "")) for i in sorted(inodes)]


def can_bind(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # As the engine's server binds (SO_REUSEADDR): connections of a just-stopped engine left in
        # TIME_WAIT must not make its own port look taken (a listener still refuses the bind).
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid
    it names one process for the life of the machine, so a reused pid is never mistaken for ours."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])
