"""SSHHost: commands over paramiko with pinned host keys, files over SFTP."""
from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

import paramiko

from hosts.base import HostFacts, OnOutput, RunResult
from hosts.errors import CommandTimeout, HostError, HostKeyRejected, HostLost
from hosts.facts import FACTS_SH, parse_facts
from hosts.known_hosts import entry_name, fingerprint, pinned_keys
from hosts.remote_cmd import kill_group_command, wrap_command
from hosts.ssh_errors import LOSS as _LOSS, TransportLost as _TransportLost
from hosts.ssh_files import SftpFiles
from hosts.ssh_liveness import Liveness
from hosts.streams import PgidMarker, StreamCollector


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, host: "SSHHost", pinned: dict) -> None:
        self.host, self.pinned = host, pinned

    def missing_host_key(self, client, hostname, key) -> None:
        pinned = ", ".join(fingerprint(k) for k in self.pinned.values()) or None
        raise HostKeyRejected(self.host.name, fingerprint(key), pinned, str(self.host.known_hosts))


class SSHHost(SftpFiles):
    def __init__(self, name: str, address: str, *, port: int = 22, user: str, key_path: str | Path,
                 known_hosts: str | Path, connect_timeout: float = 10.0, keepalive: float = 15.0,
                 kill_grace: float = 2.0) -> None:
        self.name, self.address, self.port, self.user = name, address, port, user
        self.key_path, self.known_hosts = Path(key_path), Path(known_hosts)
        self.connect_timeout, self.keepalive, self.kill_grace = connect_timeout, keepalive, kill_grace
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()
        self._liveness = Liveness(keepalive)

    # -- connection -------------------------------------------------------------------------
    def _transport(self) -> paramiko.Transport:
        with self._lock:
            if self._client is not None:
                t = self._client.get_transport()
                if t is not None and t.is_active():
                    return t
                self._drop()
            pinned = pinned_keys(self.known_hosts, self.address, self.port)
            client = paramiko.SSHClient()
            for k in pinned.values():
                client.get_host_keys().add(entry_name(self.address, self.port), k.get_name(), k)
            client.set_missing_host_key_policy(_RejectUnknown(self, pinned))
            try:
                client.connect(self.address, self.port, username=self.user, key_filename=str(self.key_path),
                               timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                               auth_timeout=self.connect_timeout, channel_timeout=self.connect_timeout,
                               allow_agent=False, look_for_keys=False)
            except paramiko.BadHostKeyException as e:
                client.close()
                raise HostKeyRejected(self.name, fingerprint(e.key), fingerprint(e.expected_key),
                                      str(self.known_hosts)) from None
            except paramiko.AuthenticationException as e:
                client.close()
                raise HostError(f"host {self.name!r}: authentication as {self.user!r} with key "
                                f"{self.key_path} failed: {e}") from None
            except HostKeyRejected:
                client.close()
                raise
            except _LOSS as e:
                client.close()
                raise HostLost(self.name, "connect", f"{self.address}:{self.port}: {e}") from None
            t = client.get_transport()
            t.set_keepalive(max(1, int(self.keepalive)))
            self._client = client
            return t

    def _drop(self) -> None:
        with self._lock:
            for c in (self._sftp, self._client):
                try:
                    if c is not None:
                        c.close()
                except Exception:  # closing a dead connection may fail in many ways; it is gone either way
                    pass
            self._sftp = self._client = None

    def _retrying(self, what: object, fn, idempotent: bool):
        """Run fn; on transport loss reconnect once, but only for idempotent operations."""
        for attempt in (1, 2):
            try:
                return fn()
            except _TransportLost as e:
                self._drop()
                if not idempotent or attempt == 2:
                    raise HostLost(self.name, what, str(e)) from None
            except HostLost as e:
                if e.command == "connect":  # name the command the caller asked for
                    raise HostLost(self.name, what, f"cannot connect: {e.detail}") from None
                raise

    # -- commands ---------------------------------------------------------------------------
    def run(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 600.0, stdin: bytes | str | None = None,
            on_output: OnOutput | None = None, replace_env: bool = False,
            idempotent: bool = False) -> RunResult:
        argv = cmd if isinstance(cmd, str) else [str(a) for a in cmd]
        wrapped = wrap_command(argv, env, cwd, replace_env)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        return self._retrying(argv, lambda: self._run_once(argv, wrapped, timeout, data, on_output), idempotent)

    def _run_once(self, argv, wrapped: str, timeout: float, data: bytes | None, on_output) -> RunResult:
        started = time.time()
        deadline = time.monotonic() + timeout
        transport = self._transport()
        try:
            chan = transport.open_session(timeout=min(self.connect_timeout, timeout))
            chan.exec_command(wrapped)
        except _LOSS as e:
            raise _TransportLost(f"opening a session: {e}") from None
        sink = StreamCollector(on_output)
        marker = PgidMarker(sink)
        threading.Thread(target=_send_stdin, args=(chan, data), daemon=True).start()
        try:
            while True:
                busy = False
                if chan.recv_ready():
                    sink.feed("stdout", chan.recv(65536))
                    busy = True
                if chan.recv_stderr_ready():
                    marker.feed(chan.recv_stderr(65536))
                    busy = True
                if sink.error is not None:
                    raise sink.error
                if busy:
                    self._liveness.heard()
                    continue
                # exit_status stays -1 until the server reports one; a closed channel without
                # it, on a dead transport, is a lost host and not an exit code.
                if not transport.is_active() and chan.exit_status == -1:
                    raise _TransportLost("connection dropped while the command ran")
                if chan.exit_status_ready() and (chan.eof_received or chan.closed):
                    break
                if self._liveness.silent_too_long(transport):
                    transport.close()
                    raise _TransportLost(f"no answer to a keepalive within {self.keepalive:g}s")
                if time.monotonic() >= deadline:
                    self._kill(marker.pgid, argv)
                    sink.feed("stdout", b"", final=True)
                    marker.close()
                    raise CommandTimeout(self.name, argv, timeout, sink.text("stdout"), sink.text("stderr"))
                chan.status_event.wait(0.05)
        except (_TransportLost, HostLost, CommandTimeout):
            chan.close()
            raise
        except BaseException:
            # Cancellation (KeyboardInterrupt, a flow being stopped): leave nothing running.
            try:
                self._kill(marker.pgid, argv)
            finally:
                chan.close()
            raise
        sink.feed("stdout", b"", final=True)
        marker.close()
        if sink.error is not None:
            raise sink.error
        code = chan.recv_exit_status()
        chan.close()
        return RunResult(argv, code, sink.text("stdout"), sink.text("stderr"), started, time.time(), host=self.name)

    def _kill(self, pgid: int | None, argv) -> None:
        if pgid is None:
            return
        try:
            t = self._transport()
            chan = t.open_session(timeout=min(self.connect_timeout, 5.0))
            chan.exec_command(kill_group_command(pgid, self.kill_grace))
            finished = chan.status_event.wait(self.kill_grace + 5.0)
            chan.close()
            if not finished:
                raise HostLost(self.name, argv, f"killing process group {pgid} did not finish")
        except (HostLost, *_LOSS) as e:
            raise HostLost(self.name, argv, f"could not kill process group {pgid}: {e}") from None

    def exists(self, path: str) -> bool:
        return self.run(f"test -e {shlex.quote(path)} || test -L {shlex.quote(path)}", idempotent=True).exit_code == 0

    def mkdir(self, path: str) -> None:
        self.run(["mkdir", "-p", "--", path], idempotent=True).check()

    def remove(self, path: str) -> None:
        self.run(["rm", "-rf", "--", path], idempotent=True).check()

    def facts(self) -> HostFacts:
        return parse_facts(self.run(FACTS_SH, timeout=60, idempotent=True).check().stdout)

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> "SSHHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _send_stdin(chan: paramiko.Channel, data: bytes | None) -> None:
    try:
        if data:
            chan.sendall(data)
        chan.shutdown_write()
    except _LOSS:
        pass  # the command or the connection ended first; the reader reports which
