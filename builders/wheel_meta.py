"""What an SBOM says about a wheel: its metadata, declared dependencies and files."""
from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from builders.errors import SbomError
from releases.canonical import file_sha256


@dataclass(frozen=True)
class Dependency:
    name: str                    # canonical (PEP 503) name
    requirements: tuple[str, ...]  # as declared, e.g. "triton>=3.6; platform_system == 'Linux'"
    optional: bool               # every declaration is under an extra


@dataclass(frozen=True)
class WheelFile:
    path: str
    sha256: str
    sha1: str            # SPDX 2.3 requires SHA-1 for every file


@dataclass(frozen=True)
class WheelInfo:
    filename: str
    sha256: str
    sha1: str
    name: str
    version: str
    summary: str
    license: str | None
    dependencies: list[Dependency]
    files: list[WheelFile]


def read_wheel(path: str | Path) -> WheelInfo:
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            meta_name = next((n for n in zf.namelist()
                              if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if meta_name is None:
                raise SbomError(f"{path.name}: no *.dist-info/METADATA in the wheel")
            meta = BytesParser().parsebytes(zf.read(meta_name))
            files = sorted((_wheel_file(zf, info) for info in zf.infolist() if not info.is_dir()),
                           key=lambda f: f.path)
    except zipfile.BadZipFile as exc:
        raise SbomError(f"{path.name}: not a wheel (zip): {exc}") from exc
    deps = _dependencies(path.name, meta.get_all("Requires-Dist") or [])
    raw = path.read_bytes()
    return WheelInfo(filename=path.name, sha256=file_sha256(path), sha1=hashlib.sha1(raw).hexdigest(),
                     name=meta["Name"], version=meta["Version"], summary=meta.get("Summary") or "",
                     license=meta.get("License-Expression") or None, dependencies=deps, files=files)


def _wheel_file(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> WheelFile:
    data = zf.read(info)
    return WheelFile(path=info.filename, sha256=hashlib.sha256(data).hexdigest(),
                     sha1=hashlib.sha1(data).hexdigest())


def _dependencies(wheel: str, declared: list[str]) -> list[Dependency]:
    """One Dependency per distribution name, however many times it is declared."""
    by_name: dict[str, list[Requirement]] = {}
    for text in declared:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise SbomError(f"{wheel}: METADATA Requires-Dist {text!r} is not a PEP 508 "
                            f"requirement: {exc}") from exc
        by_name.setdefault(canonicalize_name(req.name), []).append(req)
    return [Dependency(name=name, requirements=tuple(sorted(str(r) for r in reqs)),
                       optional=all("extra" in str(r.marker or "") for r in reqs))
            for name, reqs in sorted(by_name.items())]


@dataclass(frozen=True)
class ArtifactFile:
    """Another artifact of the same build, named in the SBOMs by its digests (the AOT kernels)."""
    name: str
    sha1: str
    sha256: str

    @classmethod
    def of(cls, path) -> "ArtifactFile":
        data = Path(path).read_bytes()
        return cls(Path(path).name, hashlib.sha1(data).hexdigest(), hashlib.sha256(data).hexdigest())
