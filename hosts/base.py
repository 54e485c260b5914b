"""The Host protocol, its result and facts types, and the tree-manifest digest all hosts share."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

from hosts.errors import CommandFailed

OnOutput = Callable[[str, str], None]


@dataclass
class RunResult:
    argv: list[str] | str
    exit_code: int
    stdout: str
    stderr: str
    started_at: float
    ended_at: float
    host: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self) -> "RunResult":
        if self.exit_code != 0:
            raise CommandFailed(self.host, self.argv, self.exit_code, self.stderr)
        return self


@dataclass
class GpuFact:
    name: str
    uuid: str
    driver_version: str
    memory_total_mib: float | None
    power_limit_w: float | None
    power_default_limit_w: float | None


@dataclass
class HostFacts:
    hostname: str
    os: str
    kernel: str
    cpu_count: int
    memory_bytes: int
    python_version: str
    gpus: list[GpuFact] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@runtime_checkable
class Host(Protocol):
    name: str

    def run(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 600.0, stdin: bytes | str | None = None,
            on_output: OnOutput | None = None, replace_env: bool = False) -> RunResult: ...

    def put(self, local: str | Path, remote: str) -> str: ...

    def get(self, remote: str, local: str | Path) -> str: ...

    def exists(self, path: str) -> bool: ...

    def mkdir(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def facts(self) -> HostFacts: ...

    def close(self) -> None: ...


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_digest(entries: Mapping[str, str]) -> str:
    """sha256 of the tree manifest: lines '<sha256>  <relpath>' sorted by path, '/'-separated."""
    text = "".join(f"{entries[p]}  {p}\n" for p in sorted(entries))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def local_tree_entries(root: str | Path) -> dict[str, str]:
    """Regular files under root by relative path -> sha256. Symlinks are refused: a digest of
    a tree must not depend on where a link points at the moment it is read."""
    from hosts.errors import TransferError

    root = Path(root)
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            if p.is_symlink():
                raise TransferError("local", str(p), "symbolic links are not transferred")
        for n in filenames:
            p = Path(dirpath) / n
            out[p.relative_to(root).as_posix()] = file_sha256(p)
    return out


# Shell snippet run on a host to list a tree's files with their digests (NUL separated,
# so that any file name survives). Needs find, sort and coreutils' sha256sum -z.
TREE_MANIFEST_SH = ("cd {root} && find . -type f -print0 | LC_ALL=C sort -z "
                    "| xargs -0 -r sha256sum -z")


def parse_tree_manifest(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for rec in raw.split("\0"):
        if not rec:
            continue
        digest, _, path = rec.partition("  ")
        if path.startswith("./"):
            path = path[2:]
        out[path] = digest.lstrip("\\")
    return out
