"""The install transaction: a write-ahead journal in DIR/.assay-install/transaction.json.

Every target is recorded BEFORE it is created, so that after any interruption (a kill, a power
loss) the journal names a superset of what exists, and undo deletes exactly what the transaction
created and restores what it replaced (the `current` link, previous_release). The journal is
written atomically (releases.atomic) and removed as the transaction's last act."""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from releases.atomic import write_atomic
from releases.install.errors import InstallError
from releases.install.layout import Prefix

# Phases, in order. `activating`: the `current` swap may or may not have happened.
PHASES = ("creating", "activating", "activated")


@dataclass
class Journal:
    prefix: Prefix
    version: str
    source: str
    phase: str = "creating"
    targets: list[dict] = field(default_factory=list)   # {"path": rel, "kind": "dir"|"file"|"link"}
    replaced: dict = field(default_factory=dict)       # rel -> previous value (link target / file text / None)
    started_at: float = field(default_factory=time.time)

    # -- persistence ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"version": self.version, "source": self.source, "phase": self.phase, "targets": self.targets,
                "replaced": self.replaced, "started_at": self.started_at}

    def save(self) -> None:
        write_atomic(self.prefix.journal, json.dumps(self.to_dict(), indent=1, sort_keys=True).encode())

    @classmethod
    def load(cls, prefix: Prefix) -> "Journal | None":
        try:
            data = json.loads(prefix.journal.read_text(encoding="utf-8"))
            return cls(prefix, data["version"], data["source"], data["phase"], list(data["targets"]),
                       dict(data["replaced"]), data["started_at"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            raise InstallError(f"unreadable transaction journal ({exc}); inspect and remove it by hand",
                               where=str(prefix.journal)) from None

    # -- recording -----------------------------------------------------------------------
    def _abs(self, rel: str) -> Path:
        return self.prefix.root / rel

    def create(self, path: Path, kind: str) -> Path:
        """Record PATH (inside the prefix) as created by this transaction; call before creating it."""
        rel = path.relative_to(self.prefix.root).as_posix()
        if not any(t["path"] == rel for t in self.targets):
            self.targets.append({"path": rel, "kind": kind})
            self.save()
        return path

    def mkdir(self, path: Path) -> None:
        """Create PATH and any missing parents inside the prefix, each recorded first."""
        missing = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            if not d.is_relative_to(self.prefix.root) or d == self.prefix.root:
                raise InstallError("is outside the prefix or is the prefix itself", where=str(d))
            self.create(d, "dir")
            d.mkdir()

    def replace(self, path: Path, previous: str | None) -> None:
        """Record the value PATH had before this transaction changes it (None: it did not exist)."""
        rel = path.relative_to(self.prefix.root).as_posix()
        if rel not in self.replaced:
            self.replaced[rel] = previous
            self.save()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.save()

    def commit(self) -> None:
        """The transaction's last act: the journal goes, what it created stays."""
        self.prefix.journal.unlink()

    # -- undo ----------------------------------------------------------------------------
    def undo(self) -> int:
        """Restore what was replaced, delete every created target (newest first); returns how many
        created targets existed and were deleted (a `current` link that did not exist before counts).
        The journal itself goes last."""
        deleted = 0
        for rel, previous in self.replaced.items():
            path = self._abs(rel)
            deleted += previous is None and os.path.lexists(path)
            if rel == self.prefix.current.relative_to(self.prefix.root).as_posix():
                _restore_link(path, previous)
            else:
                _restore_file(path, previous)
        for target in reversed(self.targets):
            path = self._abs(target["path"])
            if not os.path.lexists(path):
                continue
            if target["kind"] == "dir" and path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            deleted += 1
        self.prefix.journal.unlink(missing_ok=True)
        _rmdir_if_empty(self.prefix.state)
        return deleted


def _restore_link(path: Path, previous: str | None) -> None:
    if previous is None:
        if os.path.lexists(path):
            path.unlink()
        return
    tmp = path.with_name(f".{path.name}.undo")
    if os.path.lexists(tmp):
        tmp.unlink()
    os.symlink(previous, tmp)
    os.replace(tmp, path)


def _restore_file(path: Path, previous: str | None) -> None:
    if previous is None:
        path.unlink(missing_ok=True)
    else:
        write_atomic(path, previous.encode("utf-8"))


def _rmdir_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
