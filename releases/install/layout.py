"""Where things live under an install prefix:

    DIR/releases/<version>/        one release: venv/, release.json (what was installed), kernels/
    DIR/current                    symlink -> releases/<version> (swapped atomically)
    DIR/previous_release           the version `current` pointed to before the last activation
    DIR/.assay-install/            transaction.json while a transaction is open, lock
    DIR/run/                       service.json (pid, port), engine.log, profile.json
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from releases.install.errors import InstallError

_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def check_version(version: str, where: str) -> str:
    """A version becomes a directory name: refuse anything that could escape releases/."""
    if not isinstance(version, str) or not _VERSION.match(version) or ".." in version:
        raise InstallError(f"release version {version!r} is not a safe directory name", where=where)
    return version


@dataclass(frozen=True)
class Prefix:
    root: Path

    @classmethod
    def at(cls, root: "str | Path | Prefix") -> "Prefix":
        if isinstance(root, Prefix):  # the CLI builds one and hands it to functions that take either
            return root
        return cls(Path(os.path.abspath(root)))

    @property
    def releases(self) -> Path:
        return self.root / "releases"

    def release(self, version: str) -> Path:
        return self.releases / version

    @property
    def current(self) -> Path:
        return self.root / "current"

    @property
    def previous_file(self) -> Path:
        return self.root / "previous_release"

    @property
    def state(self) -> Path:
        return self.root / ".assay-install"

    @property
    def journal(self) -> Path:
        return self.state / "transaction.json"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def service_file(self) -> Path:
        return self.run / "service.json"

    @property
    def log(self) -> Path:
        return self.run / "engine.log"

    def current_version(self) -> str | None:
        """The version `current` points at, or None when there is no current release."""
        try:
            target = os.readlink(self.current)
        except (FileNotFoundError, OSError):
            return None
        return Path(target).name

    def previous_version(self) -> str | None:
        try:
            text = self.previous_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return text or None

    def python(self, version: str) -> Path:
        return self.release(version) / "venv" / "bin" / "python"
