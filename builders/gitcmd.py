"""Running git against a local repository, bounded and with typed errors."""
from __future__ import annotations

import subprocess
from pathlib import Path

from builders.errors import SnapshotError

GIT_TIMEOUT_S = 120.0


def git(repo: str | Path, *args: str, timeout: float = GIT_TIMEOUT_S, stdin: bytes | None = None) -> bytes:
    """Run `git -C repo ARGS` and return stdout; raise SnapshotError naming the command."""
    # A fixed, minimal config keeps user settings (pagers, hooks, colour, textconv) out of the
    # answers that identities are built from.
    argv = ["git", "-c", "core.quotepath=off", "-c", "color.ui=never", "-C", str(repo), *args]
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SnapshotError(f"git {' '.join(args)} in {repo}: timed out after {timeout}s") from exc
    except FileNotFoundError as exc:
        raise SnapshotError("git is not installed on this machine") from exc
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise SnapshotError(f"git {' '.join(args)} in {repo}: exit {proc.returncode}: {err}")
    return proc.stdout


def git_text(repo: str | Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str:
    return git(repo, *args, timeout=timeout).decode("utf-8").strip()
