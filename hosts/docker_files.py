"""DockerHost's file transfers as tar archives through the daemon, digested on both ends."""
from __future__ import annotations

import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path

from hosts.base import (TREE_MANIFEST_SH, file_sha256, local_tree_entries, manifest_digest,
                        parse_tree_manifest)
from hosts.errors import TransferError


class ArchiveFiles:
    """Mixin: needs run(), _container(), mkdir(), remove() and name."""
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
