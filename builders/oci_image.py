"""A deterministic OCI image of the engine: the debootstrap root filesystem as a normalized base
layer, plus one layer holding the engine wheel installed the way an installer would (files
unpacked into the image python's site-packages, RECORD and INSTALLER written, console scripts
generated), wrapped in an OCI image layout tar (oci-layout, index.json, blobs/sha256/...).

Every byte is a function of the inputs and SOURCE_DATE_EPOCH: members sorted by name, mtime =
the source date, uid/gid 0 with no names, modes from the source (files in the wheel layer get
0644, scripts 0755), layers left uncompressed (no gzip header or compressor version to drift),
JSON canonical (sorted keys, no spaces). Each build makes its image from its own wheel, so the
two builds' images are compared by digest like any other artifact.

The tar also carries a docker-style manifest.json beside the OCI layout (as `docker save` does)
so that older daemons, which `docker load` only that, take it too.

What the image holds, honestly: Debian's python3 and the engine package, not its runtime
dependencies (torch, numpy, ...). `import engine` and `assay-engine --help` work; generating text
needs the dependencies installed on top (see docs/REPRODUCIBILITY.md).
"""
from __future__ import annotations

import base64
import configparser
import csv
import hashlib
import io
import json
import re
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from builders.errors import BuilderError

SUFFIX = ".oci.tar"
LAYER_MEDIA = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA = "application/vnd.oci.image.index.v1+json"
INSTALLER = "assay-oci-image"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Left out of the base layer: host keys made by openssh-server's postinst (private key material
# that would ship to everyone and differ per debootstrap run), the test bed's sshd entry script,
# device nodes and the contents of the kernel filesystems (the container runtime provides those).
_DROP = re.compile(r"^(etc/ssh/ssh_host_.*|usr/local/sbin/testbed-start|dev/.+|proc/.+|sys/.+|\.debootstrap-complete)$")
_PY_DIR = re.compile(r"^usr/lib/python(3\.\d+)/os\.py$")


class ImageError(BuilderError):
    """The image could not be made from the inputs given (base tarball, wheel)."""


@dataclass(frozen=True)
class Layer:
    role: str
    digest: str  # sha256 hex of the uncompressed tar (= its diff_id)
    size: int
    members: int


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _info(name: str, mtime: int, *, mode: int, type_=tarfile.REGTYPE, size: int = 0, linkname: str = "") -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.mtime, ti.linkname = type_, mode, size, mtime, linkname
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


def _write_tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as out:
        for ti, data in sorted(entries, key=lambda e: e[0].name):
            out.addfile(ti, io.BytesIO(data) if data is not None else None)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _layer(path: Path, role: str, members: int) -> Layer:
    return Layer(role=role, digest=_sha256(path), size=path.stat().st_size, members=members)


def normalize_base(rootfs_tar: Path, out: Path, mtime: int) -> tuple[Layer, str]:
    """The root filesystem tarball rewritten deterministically; returns the layer and the image
    python's version (3.X, from usr/lib/python3.X/os.py) that the wheel layer installs for."""
    try:
        src = tarfile.open(rootfs_tar, "r:")
    except (OSError, tarfile.TarError) as exc:
        raise ImageError(f"base root filesystem {rootfs_tar}: not a readable tar ({exc})") from exc
    pyver = None
    with src:
        members = {}
        for m in src.getmembers():
            name = m.name.removeprefix("./").rstrip("/")
            if name in ("", ".") or _DROP.match(name) or not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
                continue
            members[name] = m
            hit = _PY_DIR.match(name)
            pyver = pyver or (hit.group(1) if hit else None)
        if pyver is None:
            raise ImageError(f"base root filesystem {rootfs_tar}: no usr/lib/python3.X/os.py, so no python to install into")
        # Written member by member in name order; hard links become regular files, because a
        # link sorted before its target cannot be unpacked.
        with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as dst:
            for name in sorted(members):
                m = members[name]
                mode = m.mode & 0o7777
                if m.isdir():
                    dst.addfile(_info(name, mtime, mode=mode, type_=tarfile.DIRTYPE))
                elif m.issym():
                    dst.addfile(_info(name, mtime, mode=mode, type_=tarfile.SYMTYPE, linkname=m.linkname))
                else:
                    data = src.extractfile(m).read()
                    dst.addfile(_info(name, mtime, mode=mode, size=len(data)), io.BytesIO(data))
    return _layer(out, "base", len(members)), pyver


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


_SCRIPT = """#!/usr/bin/python3
# -*- coding: utf-8 -*-
import re
import sys
from {module} import {attr}
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit({call}())
"""


def wheel_files(wheel: Path, pyver: str) -> dict[str, tuple[bytes, int]]:
    """What installing WHEEL puts in the image: {path in the root fs: (bytes, mode)}.

    Purelib/platlib go to /usr/local/lib/python3.X/dist-packages (Debian's place for packages
    not from dpkg), scripts and generated console scripts to /usr/local/bin, and the RECORD is
    rewritten for the installed paths with INSTALLER added, as PEP 376/627 ask. No bytecode is
    compiled (python writes none into a read-only layer; it compiles in memory)."""
    site = f"usr/local/lib/python{pyver}/dist-packages"
    to_site = "../../../../"  # from site-packages back to the root, for RECORD paths
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ImageError(f"wheel {wheel}: not a readable zip ({exc})") from exc
    files: dict[str, tuple[bytes, int]] = {}
    with zf:
        infos = sorted((i for i in zf.infolist() if not i.is_dir()), key=lambda i: i.filename)
        dist_info = sorted({i.filename.split("/")[0] for i in infos if i.filename.split("/")[0].endswith(".dist-info")})
        if len(dist_info) != 1:
            raise ImageError(f"wheel {wheel}: expected one .dist-info directory, found {dist_info}")
        dist_info = dist_info[0]
        data_dir = dist_info.removesuffix(".dist-info") + ".data"
        for info in infos:
            name, data = info.filename, zf.read(info)
            if name == f"{dist_info}/RECORD":
                continue
            parts = name.split("/")
            if parts[0] == data_dir and len(parts) > 2:
                scheme, rest = parts[1], "/".join(parts[2:])
                if scheme in ("purelib", "platlib"):
                    files[f"{site}/{rest}"] = (data, 0o644)
                elif scheme == "scripts":
                    data = re.sub(rb"^#!python[^\n]*", b"#!/usr/bin/python3", data)
                    files[f"usr/local/bin/{rest}"] = (data, 0o755)
                elif scheme == "data":
                    files[f"usr/local/{rest}"] = (data, 0o644)
                else:
                    raise ImageError(f"wheel {wheel}: member {name}: scheme {scheme!r} is not installed by this image builder")
            else:
                files[f"{site}/{name}"] = (data, 0o644)
        entry_points = files.get(f"{site}/{dist_info}/entry_points.txt")
    if entry_points:
        cp = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        cp.optionxform = str
        cp.read_string(entry_points[0].decode())
        for script, target in (cp.items("console_scripts") if cp.has_section("console_scripts") else []):
            module, _, attr = target.strip().partition(":")
            attr = attr.strip() or "main"
            text = _SCRIPT.format(module=module.strip(), attr=attr.split(".")[0], call=attr)
            files[f"usr/local/bin/{script}"] = (text.encode(), 0o755)
    files[f"{site}/{dist_info}/INSTALLER"] = (f"{INSTALLER}\n".encode(), 0o644)
    record_path = f"{site}/{dist_info}/RECORD"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for path in sorted(files):
        rel = path[len(site) + 1:] if path.startswith(site + "/") else to_site + path
        writer.writerow([rel, _record_hash(files[path][0]), len(files[path][0])])
    writer.writerow([record_path[len(site) + 1:], "", ""])
    files[record_path] = (buf.getvalue().encode(), 0o644)
    return files


def wheel_layer(wheel: Path, pyver: str, out: Path, mtime: int) -> Layer:
    files = wheel_files(wheel, pyver)
    dirs = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
    entries = [(_info(d, mtime, mode=0o755, type_=tarfile.DIRTYPE), None) for d in dirs]
    entries += [(_info(p, mtime, mode=mode, size=len(data)), data) for p, (data, mode) in files.items()]
    _write_tar(out, entries)
    return _layer(out, "wheel", len(entries))


def build_image(rootfs_tar: Path, wheel: Path, out: Path, source_date_epoch: int, *,
                ref_name: str, workdir: Path) -> dict:
    """Write the OCI image layout tar OUT; returns its record (image digest = the manifest's)."""
    workdir.mkdir(parents=True, exist_ok=True)
    base_path, wheel_path = workdir / "base.tar", workdir / "wheel.tar"
    base, pyver = normalize_base(rootfs_tar, base_path, source_date_epoch)
    engine = wheel_layer(wheel, pyver, wheel_path, source_date_epoch)
    created = datetime.fromtimestamp(source_date_epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = canonical({
        "architecture": "amd64", "os": "linux", "created": created,
        "config": {"Env": [PATH_ENV, "LANG=C.UTF-8"], "Cmd": ["/usr/local/bin/assay-engine", "--help"],
                   "Labels": {"org.opencontainers.image.title": "assay-engine",
                              "org.opencontainers.image.created": created}},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{base.digest}", f"sha256:{engine.digest}"]},
        "history": [{"created": created, "created_by": "debootstrap root filesystem, normalized"},
                    {"created": created, "created_by": f"install {wheel.name}"}],
    })
    config_digest = hashlib.sha256(config).hexdigest()
    manifest = canonical({
        "schemaVersion": 2, "mediaType": MANIFEST_MEDIA,
        "config": {"mediaType": CONFIG_MEDIA, "digest": f"sha256:{config_digest}", "size": len(config)},
        "layers": [{"mediaType": LAYER_MEDIA, "digest": f"sha256:{la.digest}", "size": la.size} for la in (base, engine)],
    })
    manifest_digest = hashlib.sha256(manifest).hexdigest()
    index = canonical({
        "schemaVersion": 2, "mediaType": INDEX_MEDIA,
        "manifests": [{"mediaType": MANIFEST_MEDIA, "digest": f"sha256:{manifest_digest}", "size": len(manifest),
                       "annotations": {"io.containerd.image.name": ref_name,
                                       "org.opencontainers.image.ref.name": ref_name.rpartition(":")[2]}}],
    })
    docker_manifest = canonical([{"Config": f"blobs/sha256/{config_digest}", "RepoTags": [ref_name],
                                  "Layers": [f"blobs/sha256/{la.digest}" for la in (base, engine)]}])
    mtime = source_date_epoch
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
        small = {"oci-layout": canonical({"imageLayoutVersion": "1.0.0"}), "index.json": index,
                 "manifest.json": docker_manifest, f"blobs/sha256/{config_digest}": config,
                 f"blobs/sha256/{manifest_digest}": manifest}
        bigs = {f"blobs/sha256/{base.digest}": base_path, f"blobs/sha256/{engine.digest}": wheel_path}
        for d in ("blobs", "blobs/sha256"):
            t.addfile(_info(d, mtime, mode=0o755, type_=tarfile.DIRTYPE))
        for name in sorted({*small, *bigs}):
            if name in small:
                t.addfile(_info(name, mtime, mode=0o644, size=len(small[name])), io.BytesIO(small[name]))
            else:
                with open(bigs[name], "rb") as f:
                    t.addfile(_info(name, mtime, mode=0o644, size=bigs[name].stat().st_size), f)
    base_path.unlink()
    wheel_path.unlink()
    return {"name": out.name, "ref_name": ref_name, "digest": {"sha256": _sha256(out)},
            "image_digest": f"sha256:{manifest_digest}", "config_digest": f"sha256:{config_digest}",
            "python": pyver,
            "layers": [{"role": la.role, "digest": f"sha256:{la.digest}", "size": la.size, "members": la.members}
                       for la in (base, engine)]}


def rootfs_from_docker_image(tag: str, out: Path, timeout: float = 600) -> Path:
    """The root filesystem tarball of a single-layer image made by `docker import` (the test bed's
    debootstrap image, hosts.rootfs_image), read back with `docker save`: the pipeline reuses the
    root fs already built instead of running debootstrap again (minutes)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    saved = out.with_suffix(".save.tar")
    proc = subprocess.run(["docker", "save", "-o", str(saved), tag], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ImageError(f"docker save {tag} exited {proc.returncode}: {proc.stderr[-2000:]}")
    try:
        with tarfile.open(saved, "r:") as t:
            manifest = json.load(t.extractfile("manifest.json"))
            layers = manifest[0]["Layers"]
            if len(layers) != 1:
                raise ImageError(f"image {tag}: {len(layers)} layers; the base must be one imported root fs")
            with t.extractfile(layers[0]) as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    finally:
        saved.unlink(missing_ok=True)
    return out
