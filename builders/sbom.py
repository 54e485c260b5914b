"""SBOMs of a built wheel: SPDX 2.3 and CycloneDX 1.5, deterministic and validated.

Deterministic by construction: the creation time is SOURCE_DATE_EPOCH, the SPDX namespace
and the CycloneDX serial number are uuid5 of the wheel's SHA-256, lists are sorted and the
JSON is written with sorted keys. Nothing in them names a machine path.
"""
from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

from builders.sbom_cyclonedx import cyclonedx_bom
from builders.sbom_spdx import spdx_document
from builders.wheel_meta import ArtifactFile, read_wheel

# Keys as releases.release_dir names the formats (ReleaseDir.add_sbom(path, fmt)).
SPDX = "spdx-2.3"
CYCLONEDX = "cyclonedx-1.5"
SPDX_SUFFIX = ".spdx.json"
CDX_SUFFIX = ".cdx.json"


def sbom_bytes(data: dict) -> bytes:
    return (json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def spdx_json(wheel: str | Path, candidate: dict) -> bytes:
    return sbom_bytes(spdx_document(read_wheel(wheel), candidate, tool=_tool()))


def cyclonedx_json(wheel: str | Path, candidate: dict) -> bytes:
    return sbom_bytes(cyclonedx_bom(read_wheel(wheel), candidate))


def write_sboms(wheel: str | Path, candidate: dict, out_dir: str | Path,
                kernels: str | Path | None = None, resolved: dict | None = None) -> dict[str, Path]:
    """Write <wheel stem>.spdx.json and <wheel stem>.cdx.json into OUT_DIR; KERNELS (the build's AOT
    kernels artifact) is named in both by its digests; RESOLVED (builders.resolved_deps.resolve) gives
    each dependency the version installed where the lanes run it (purls with versions).

    Returns {"spdx-2.3": path, "cyclonedx-1.5": path}.
    """
    wheel, out = Path(wheel), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = read_wheel(wheel)
    stem = wheel.name[: -len(".whl")] if wheel.name.endswith(".whl") else wheel.stem
    paths = {SPDX: out / f"{stem}{SPDX_SUFFIX}", CYCLONEDX: out / f"{stem}{CDX_SUFFIX}"}
    extra = ArtifactFile.of(kernels) if kernels is not None else None
    paths[SPDX].write_bytes(sbom_bytes(spdx_document(info, candidate, tool=_tool(), kernels=extra, resolved=resolved)))
    paths[CYCLONEDX].write_bytes(sbom_bytes(cyclonedx_bom(info, candidate, kernels=extra, resolved=resolved)))
    return paths


def _tool() -> str:
    try:
        return f"assay-{metadata.version('assay')}"
    except metadata.PackageNotFoundError:
        return "assay"
