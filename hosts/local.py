"""LocalHost: the machine this process runs on."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from hosts.base import HostFacts, OnOutput, RunResult, file_sha256, local_tree_entries, manifest_digest
from hosts.errors import CommandTimeout, TransferError
from hosts.facts import gather_facts
from hosts.streams import StreamCollector, pump

KILL_GRACE_S = 2.0


def kill_group(pgid: int, grace: float = KILL_GRACE_S) -> None:
    """TERM the process group, then KILL whatever of it is still there after grace seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class LocalHost:
    def __init__(self, name: str = "local") -> None:
        self.name = name

    def run(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 600.0, stdin: bytes | str | None = None,
            on_output: OnOutput | None = None, replace_env: bool = False) -> RunResult:
        argv = cmd if isinstance(cmd, str) else [str(a) for a in cmd]
        full_env = dict(env or {}) if replace_env else {**os.environ, **(env or {})}
        sink = StreamCollector(on_output)
        started = time.time()
        # Own session and process group: on timeout the whole group is killed, no orphans.
        proc = subprocess.Popen(argv, shell=isinstance(argv, str), env=full_env, cwd=cwd,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        pumps = [pump(lambda n: os.read(proc.stdout.fileno(), n), "stdout", sink),
                 pump(lambda n: os.read(proc.stderr.fileno(), n), "stderr", sink)]
        if stdin is not None:
            data = stdin.encode() if isinstance(stdin, str) else stdin
            threading.Thread(target=_feed_stdin, args=(proc, data), daemon=True).start()
        deadline = time.monotonic() + timeout
        try:
            while True:
                if sink.error is not None:
                    raise sink.error
                # children left in the group may hold the pipes open after the leader exits
                alive = [t for t in pumps if t.is_alive()]
                if proc.poll() is not None and not alive:
                    break
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(argv, timeout)
                alive[0].join(0.05) if alive else time.sleep(0.05)
            if sink.error is not None:
                raise sink.error
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
            for t in pumps:
                t.join(2.0)
            raise CommandTimeout(self.name, argv, timeout, sink.text("stdout"), sink.text("stderr")) from None
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            raise
        finally:
            for f in (proc.stdout, proc.stderr):
                f.close()
        return RunResult(argv, proc.returncode, sink.text("stdout"), sink.text("stderr"),
                         started, time.time(), host=self.name)

    def put(self, local: str | Path, remote: str) -> str:
        return _copy_checked(self.name, Path(local), Path(remote))

    def get(self, remote: str, local: str | Path) -> str:
        return _copy_checked(self.name, Path(remote), Path(local))

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def mkdir(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def facts(self) -> HostFacts:
        facts = gather_facts(self)
        facts.hostname = facts.hostname or socket.gethostname()
        return facts

    def close(self) -> None:
        pass

    def __enter__(self) -> "LocalHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _feed_stdin(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command stopped reading; its exit code says what happened
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _copy_checked(host: str, src: Path, dst: Path) -> str:
    """Copy a file or tree, digesting the source before and the destination after."""
    if src.is_dir():
        before = manifest_digest(local_tree_entries(src))
        if dst.exists():
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        shutil.copytree(src, dst, symlinks=True)
        after = manifest_digest(local_tree_entries(dst))
    elif src.is_file():
        before = file_sha256(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        after = file_sha256(dst)
    else:
        raise TransferError(host, str(src), "no such file or directory")
    if before != after:
        raise TransferError(host, str(dst), f"digest mismatch: source {before}, copy {after}")
    return after
