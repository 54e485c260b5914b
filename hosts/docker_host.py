"""DockerHost: commands in a named running container (or an ephemeral one from an image with
mounts) through the docker SDK; files copied in and out as tar archives."""
from __future__ import annotations

import io
import shlex
import shutil
import socket
import struct
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Mapping, Sequence

from hosts.base import (TREE_MANIFEST_SH, HostFacts, OnOutput, RunResult, file_sha256,
                        local_tree_entries, manifest_digest, parse_tree_manifest)
from hosts.errors import CommandTimeout, HostError, HostLost, TransferError
from hosts.facts import gather_facts
from hosts.remote_cmd import kill_group_command, wrap_command
from hosts.streams import PgidMarker, StreamCollector

EPHEMERAL_LABEL = "assay.host.ephemeral"


class DockerHost:
    def __init__(self, name: str, *, container: str, client=None, api_timeout: float = 60.0,
                 kill_grace: float = 2.0, _owned: bool = False) -> None:
        import docker

        self.name, self.container_name, self.kill_grace = name, container, kill_grace
        self._client = client or docker.from_env(timeout=api_timeout)
        self._owned = _owned

    @classmethod
    def ephemeral(cls, name: str, image: str, *, mounts: Sequence[str] = (), client=None) -> "DockerHost":
        """A container of its own from image (mounts as 'src:dst[:ro|rw]'); removed by close()."""
        import docker

        client = client or docker.from_env(timeout=60)
        c = client.containers.run(image, ["sleep", "infinity"], detach=True, volumes=list(mounts),
                                  name=f"assay-{name}-{uuid.uuid4().hex[:8]}", labels={EPHEMERAL_LABEL: name})
        return cls(name, container=c.name, client=client, _owned=True)

    def _container(self, what: object):
        import docker.errors
        import requests

        try:
            c = self._client.containers.get(self.container_name)
        except docker.errors.NotFound:
            raise HostLost(self.name, what, f"container {self.container_name!r} is gone") from None
        except (docker.errors.APIError, requests.RequestException) as e:
            raise HostLost(self.name, what, f"docker daemon: {e}") from None
        if c.status != "running":
            raise HostLost(self.name, what, f"container {self.container_name!r} is {c.status}")
        return c

    # -- commands ---------------------------------------------------------------------------
    def run(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 600.0, stdin: bytes | str | None = None,
            on_output: OnOutput | None = None, replace_env: bool = False) -> RunResult:
        argv = cmd if isinstance(cmd, str) else [str(a) for a in cmd]
        data = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.time()
        deadline = time.monotonic() + timeout
        c = self._container(argv)
        api = self._client.api
        try:
            exec_id = api.exec_create(c.id, ["sh", "-c", wrap_command(argv, env, cwd, replace_env)],
                                      stdin=True, stdout=True, stderr=True)["Id"]
            raw = api.exec_start(exec_id, socket=True)
        except Exception as e:  # docker-py raises several unrelated types for a daemon gone away
            self._container(argv)
            raise HostLost(self.name, argv, f"starting the command: {e}") from None
        sock: socket.socket = getattr(raw, "_sock", raw)
        sink = StreamCollector(on_output)
        marker = PgidMarker(sink)
        reader = threading.Thread(target=_read_frames, args=(sock, sink, marker), daemon=True)
        reader.start()
        threading.Thread(target=_send_stdin, args=(sock, data), daemon=True).start()
        try:
            while reader.is_alive():
                reader.join(min(0.2, max(0.0, deadline - time.monotonic())))
                if reader.is_alive() and time.monotonic() >= deadline:
                    self._kill(marker.pgid, argv)
                    reader.join(self.kill_grace + 2)
                    raise CommandTimeout(self.name, argv, timeout, sink.text("stdout"), sink.text("stderr"))
        except BaseException as e:
            if not isinstance(e, (CommandTimeout, HostLost)):
                self._kill(marker.pgid, argv)  # cancellation: leave nothing running
            raise
        finally:
            _close(raw)
        sink.feed("stdout", b"", final=True)
        marker.close()
        info = self._inspect_exec(exec_id, argv)
        if info.get("Running") or info.get("ExitCode") is None:
            raise HostLost(self.name, argv, "the command's stream ended but it has no exit code")
        self._check_alive_after(int(info["ExitCode"]), argv)
        return RunResult(argv, int(info["ExitCode"]), sink.text("stdout"), sink.text("stderr"),
                         started, time.time(), host=self.name)

    def _check_alive_after(self, exit_code: int, argv) -> None:
        """A container killed under the command is lost, not a failed command. The daemon may
        report the exec's signal death a moment before the container's own state changes, so
        a command that died of a signal gets a short grace period for that state to show."""
        settle = time.monotonic() + (2.0 if exit_code >= 128 else 0.0)
        while True:
            self._container(argv)
            if time.monotonic() >= settle:
                return
            time.sleep(0.1)

    def _inspect_exec(self, exec_id: str, argv) -> dict:
        try:
            return self._client.api.exec_inspect(exec_id)
        except Exception as e:  # see above: any failure here means the host is unreachable
            self._container(argv)
            raise HostLost(self.name, argv, f"inspecting the command: {e}") from None

    def _kill(self, pgid: int | None, argv) -> None:
        if pgid is None:
            return
        c = self._container(argv)
        try:
            c.exec_run(["sh", "-c", kill_group_command(pgid, self.kill_grace)])
        except Exception as e:  # as above
            raise HostLost(self.name, argv, f"could not kill process group {pgid}: {e}") from None

    # -- files ------------------------------------------------------------------------------
    def _remote_sha(self, path: str) -> str:
        r = self.run(["sha256sum", "--", path])
        if r.exit_code != 0:
            raise TransferError(self.name, path, f"cannot digest: {r.stderr.strip()}")
        return r.stdout.split()[0]

    def _remote_tree(self, root: str) -> dict[str, str]:
        r = self.run(TREE_MANIFEST_SH.format(root=shlex.quote(root)))
        if r.exit_code != 0:
            raise TransferError(self.name, root, f"cannot list tree: {r.stderr.strip()}")
        return parse_tree_manifest(r.stdout)

    def put(self, local: str | Path, remote: str) -> str:
        local = Path(local)
        if not local.exists():
            raise TransferError(self.name, str(local), "no such local file or directory")
        is_dir = local.is_dir()
        ours = local_tree_entries(local) if is_dir else file_sha256(local)
        parent, base = str(Path(remote).parent), Path(remote).name
        self.remove(remote)
        self.mkdir(parent)
        with tempfile.TemporaryFile() as buf:
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(str(local), arcname=base, recursive=True)
            buf.seek(0)
            if not self._container(f"put {remote}").put_archive(parent, buf):
                raise TransferError(self.name, remote, "the daemon refused the archive")
        if is_dir:
            theirs = self._remote_tree(remote)
            if theirs != ours:
                raise TransferError(self.name, remote, "tree digests differ after upload")
            return manifest_digest(ours)
        theirs = self._remote_sha(remote)
        if theirs != ours:
            raise TransferError(self.name, remote, f"digest mismatch after upload: local {ours}, remote {theirs}")
        return ours

    def get(self, remote: str, local: str | Path) -> str:
        local = Path(local)
        is_dir = self.run(["test", "-d", remote]).exit_code == 0
        theirs = self._remote_tree(remote) if is_dir else self._remote_sha(remote)
        stream, _ = self._container(f"get {remote}").get_archive(remote)
        local.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as buf, tempfile.TemporaryDirectory(dir=local.parent) as tmp:
            for chunk in stream:
                buf.write(chunk)
            buf.seek(0)
            with tarfile.open(fileobj=buf, mode="r") as tar:
                tar.extractall(tmp, filter="data")
            got = Path(tmp) / Path(remote).name
            if local.exists():
                shutil.rmtree(local) if local.is_dir() else local.unlink()
            shutil.move(str(got), str(local))
        if is_dir:
            ours = local_tree_entries(local)
            if ours != theirs:
                raise TransferError(self.name, remote, "tree digests differ after download")
            return manifest_digest(ours)
        ours = file_sha256(local)
        if ours != theirs:
            raise TransferError(self.name, remote, f"digest mismatch after download: remote {theirs}, local {ours}")
        return ours

    def exists(self, path: str) -> bool:
        return self.run(f"test -e {shlex.quote(path)} || test -L {shlex.quote(path)}").exit_code == 0

    def mkdir(self, path: str) -> None:
        self.run(["mkdir", "-p", "--", path]).check()

    def remove(self, path: str) -> None:
        self.run(["rm", "-rf", "--", path]).check()

    def facts(self) -> HostFacts:
        return gather_facts(self)

    def close(self) -> None:
        if self._owned:
            try:
                self._client.containers.get(self.container_name).remove(force=True)
            except Exception as e:  # already gone is fine; anything else is reported
                if "No such container" not in str(e):
                    raise HostError(f"host {self.name!r}: could not remove container {self.container_name}: {e}")
            self._owned = False

    def __enter__(self) -> "DockerHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_frames(sock: socket.socket, sink: StreamCollector, marker: PgidMarker) -> None:
    """Demultiplex docker's attach stream: 8-byte header (stream, 0, 0, 0, size) then payload."""
    f = sock.makefile("rb") if hasattr(sock, "makefile") else sock
    try:
        while True:
            header = f.read(8)
            if len(header) < 8:
                return
            stream, size = header[0], struct.unpack(">I", header[4:])[0]
            payload = f.read(size)
            if stream == 2:
                marker.feed(payload)
            else:
                sink.feed("stdout", payload)
            if len(payload) < size:
                return
    except (OSError, ValueError):
        return  # the stream broke: run() then asks the daemon whether the container lives


def _send_stdin(sock: socket.socket, data: bytes | None) -> None:
    try:
        if data:
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the command ended or the container went away; run() reports which


def _close(raw) -> None:
    try:
        raw.close()
    except OSError:
        pass
