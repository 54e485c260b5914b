"""SSHHost's file transfers over SFTP, digested with SHA-256 on both ends."""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import paramiko

from hosts.base import (TREE_MANIFEST_SH, file_sha256, local_tree_entries, manifest_digest,
                        parse_tree_manifest)
from hosts.errors import TransferError
from hosts.ssh_errors import LOSS as _LOSS, TransportLost as _TransportLost


class SftpFiles:
    """Mixin: needs run(), _transport(), _retrying(), remove(), name, _lock and _sftp."""
    def _sftp_client(self, timeout: float) -> paramiko.SFTPClient:
        with self._lock:
            t = self._transport()
            if self._sftp is None:
                try:
                    self._sftp = paramiko.SFTPClient.from_transport(t)
                except _LOSS as e:
                    raise _TransportLost(f"opening SFTP: {e}") from None
            self._sftp.get_channel().settimeout(timeout)
            return self._sftp

    def _remote_sha(self, path: str) -> str:
        r = self.run(["sha256sum", "--", path], timeout=600, idempotent=True)
        if r.exit_code != 0:
            raise TransferError(self.name, path, f"cannot digest: {r.stderr.strip()}")
        return r.stdout.split()[0]

    def _remote_tree(self, root: str) -> dict[str, str]:
        r = self.run(TREE_MANIFEST_SH.format(root=shlex.quote(root)), timeout=600, idempotent=True)
        if r.exit_code != 0:
            raise TransferError(self.name, root, f"cannot list tree: {r.stderr.strip()}")
        return parse_tree_manifest(r.stdout)

    def put(self, local: str | Path, remote: str, timeout: float = 600.0) -> str:
        local = Path(local)
        return self._retrying(f"put {remote}", lambda: self._put_once(local, remote, timeout), True)

    def _put_once(self, local: Path, remote: str, timeout: float) -> str:
        if local.is_dir():
            entries = local_tree_entries(local)
            self.remove(remote)
            dirs = {str(Path(p).parent) for p in entries} | {"."}
            self.run(["mkdir", "-p", *(f"{remote}/{d}" for d in sorted(dirs))], idempotent=True).check()
            sftp = self._sftp_client(timeout)
            for rel in sorted(entries):
                _sftp_io(lambda: sftp.put(str(local / rel), f"{remote}/{rel}"))
            theirs = self._remote_tree(remote)
            if theirs != entries:
                bad = sorted(p for p in set(entries) | set(theirs) if entries.get(p) != theirs.get(p))
                raise TransferError(self.name, remote, f"tree digests differ after upload at {bad[:5]}")
            return manifest_digest(entries)
        if not local.is_file():
            raise TransferError(self.name, str(local), "no such local file or directory")
        ours = file_sha256(local)
        parent = str(Path(remote).parent)
        self.run(["mkdir", "-p", parent], idempotent=True).check()
        sftp = self._sftp_client(timeout)
        _sftp_io(lambda: sftp.put(str(local), remote))
        theirs = self._remote_sha(remote)
        if theirs != ours:
            raise TransferError(self.name, remote, f"digest mismatch after upload: local {ours}, remote {theirs}")
        return ours

    def get(self, remote: str, local: str | Path, timeout: float = 600.0) -> str:
        local = Path(local)
        return self._retrying(f"get {remote}", lambda: self._get_once(remote, local, timeout), True)

    def _get_once(self, remote: str, local: Path, timeout: float) -> str:
        is_dir = self.run(["test", "-d", remote], idempotent=True).exit_code == 0
        sftp = self._sftp_client(timeout)
        if is_dir:
            theirs = self._remote_tree(remote)
            if local.exists():  # the copy must equal the remote tree, nothing more
                shutil.rmtree(local) if local.is_dir() else local.unlink()
            for rel in sorted(theirs):
                (local / rel).parent.mkdir(parents=True, exist_ok=True)
                _sftp_io(lambda: sftp.get(f"{remote}/{rel}", str(local / rel)))
            local.mkdir(parents=True, exist_ok=True)
            ours = local_tree_entries(local)
            if ours != theirs:
                bad = sorted(p for p in set(ours) | set(theirs) if ours.get(p) != theirs.get(p))
                raise TransferError(self.name, remote, f"tree digests differ after download at {bad[:5]}")
            return manifest_digest(theirs)
        theirs = self._remote_sha(remote)
        local.parent.mkdir(parents=True, exist_ok=True)
        _sftp_io(lambda: sftp.get(remote, str(local)))
        ours = file_sha256(local)
        if ours != theirs:
            raise TransferError(self.name, remote, f"digest mismatch after download: remote {theirs}, local {ours}")
        return ours


def _sftp_io(fn) -> None:
    try:
        fn()
    except _LOSS as e:
        raise _TransportLost(f"SFTP: {e}") from None
