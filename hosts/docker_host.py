"""DockerHost: commands in a named running container (or an ephemeral one from an image with
mounts) through the docker SDK; files copied in and out as tar archives."""
from __future__ import annotations

import shlex
import socket
import struct
import threading
import time
import uuid
from typing import Mapping, Sequence

from hosts.base import HostFacts, OnOutput, RunResult
from hosts.docker_files import ArchiveFiles
from hosts.errors import CommandTimeout, HostError, HostLost
from hosts.facts import gather_facts
from hosts.remote_cmd import kill_group_command, wrap_command
from hosts.streams import PgidMarker, StreamCollector

EPHEMERAL_LABEL = "assay.host.ephemeral"
LOOK_EVERY_S = 2.0


class DockerHost(ArchiveFiles):
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
        # The socket inherits the API client's timeout; a command silent for that long (a compile)
        # would end the stream while it still runs. The loop below owns the deadline instead.
        sock.settimeout(None)
        sink = StreamCollector(on_output)
        marker = PgidMarker(sink)
        reader = threading.Thread(target=_read_frames, args=(sock, sink, marker), daemon=True)
        reader.start()
        threading.Thread(target=_send_stdin, args=(sock, data), daemon=True).start()
        try:
            next_look = time.monotonic() + LOOK_EVERY_S
            while reader.is_alive():
                reader.join(min(0.2, max(0.0, deadline - time.monotonic())))
                if sink.error is not None:
                    raise sink.error
                if time.monotonic() >= next_look:  # a paused or dead container sends no EOF
                    self._container(argv)
                    next_look = time.monotonic() + LOOK_EVERY_S
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
        if sink.error is not None:
            raise sink.error
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
