"""SPDX 2.3 JSON for a wheel, built and validated with spdx-tools."""
from __future__ import annotations

import datetime as dt
import re
import uuid

from license_expression import ExpressionError, get_spdx_licensing
from spdx_tools.spdx.jsonschema.document_converter import DocumentConverter
from spdx_tools.spdx.model import (Actor, ActorType, Checksum, ChecksumAlgorithm, CreationInfo,
                                   Document, ExternalPackageRef, ExternalPackageRefCategory, File,
                                   Package, Relationship, RelationshipType, SpdxNoAssertion)
from spdx_tools.spdx.spdx_element_utils import calculate_package_verification_code
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from builders.errors import SbomError
from builders.wheel_meta import ArtifactFile, WheelInfo

NAMESPACE_BASE = "https://assay.dev/spdx"


def spdx_document(info: WheelInfo, candidate: dict, tool: str, kernels: ArtifactFile | None = None,
                  resolved: dict | None = None) -> dict:
    """The SPDX document as a JSON-ready dict; raises SbomError if spdx-tools finds it invalid."""
    created = dt.datetime.fromtimestamp(candidate["source_date_epoch"], dt.timezone.utc)
    # Same wheel bytes -> same namespace; a different wheel can never reuse one.
    ns = uuid.uuid5(uuid.NAMESPACE_URL, f"sha256:{info.sha256}")
    creation = CreationInfo(
        spdx_version="SPDX-2.3", spdx_id="SPDXRef-DOCUMENT", name=f"{info.name}-{info.version}",
        document_namespace=f"{NAMESPACE_BASE}/{_safe(info.name)}-{info.version}-{ns}",
        creators=[Actor(ActorType.TOOL, tool)], created=created)
    files = [File(name=f"./{f.path}", spdx_id=f"SPDXRef-File-{i:05d}",
                  checksums=[Checksum(ChecksumAlgorithm.SHA1, f.sha1),
                             Checksum(ChecksumAlgorithm.SHA256, f.sha256)])
             for i, f in enumerate(info.files, start=1)]
    main_id = f"SPDXRef-Package-{_safe(info.name)}"
    main = Package(
        spdx_id=main_id, name=info.name, version=info.version, file_name=info.filename,
        download_location=SpdxNoAssertion(), files_analyzed=True,
        verification_code=calculate_package_verification_code(files),
        checksums=[Checksum(ChecksumAlgorithm.SHA1, info.sha1),
                   Checksum(ChecksumAlgorithm.SHA256, info.sha256)],
        license_concluded=SpdxNoAssertion(), license_declared=_license(info.license),
        copyright_text=SpdxNoAssertion(), summary=info.summary or None,
        source_info=f"built from git commit {candidate['commit']} (tree {candidate['tree']})",
        external_references=[_purl(info.name, info.version)])
    versions = (resolved or {}).get("versions", {})   # builders.resolved_deps: where the lanes ran
    where = f"; resolved in the lane environment, python {resolved['python']}" if resolved else ""
    deps = [Package(spdx_id=f"SPDXRef-Package-dep-{_safe(d.name)}", name=d.name, version=versions.get(d.name),
                    download_location=SpdxNoAssertion(), files_analyzed=False,
                    comment="declared requirement: " + " | ".join(d.requirements) + (where if versions.get(d.name) else ""),
                    external_references=[_purl(d.name, versions.get(d.name))])
            for d in info.dependencies]
    relationships = [Relationship("SPDXRef-DOCUMENT", RelationshipType.DESCRIBES, main_id)]
    relationships += [Relationship(main_id, RelationshipType.CONTAINS, f.spdx_id) for f in files]
    for d, pkg in zip(info.dependencies, deps):
        if d.optional:
            relationships.append(Relationship(pkg.spdx_id, RelationshipType.OPTIONAL_DEPENDENCY_OF, main_id))
        else:
            relationships.append(Relationship(main_id, RelationshipType.DEPENDS_ON, pkg.spdx_id))
    extra = []
    if kernels is not None:   # the build's AOT kernels: compiled from this package's source
        extra = [Package(spdx_id="SPDXRef-Package-kernels", name=kernels.name, file_name=kernels.name,
                         download_location=SpdxNoAssertion(), files_analyzed=False,
                         checksums=[Checksum(ChecksumAlgorithm.SHA1, kernels.sha1),
                                    Checksum(ChecksumAlgorithm.SHA256, kernels.sha256)],
                         comment="ahead-of-time compiled GPU kernels (cubins) of the package above")]
        relationships += [Relationship("SPDXRef-DOCUMENT", RelationshipType.DESCRIBES, "SPDXRef-Package-kernels"),
                          Relationship("SPDXRef-Package-kernels", RelationshipType.GENERATED_FROM, main_id)]
    document = Document(creation_info=creation, packages=[main, *deps, *extra], files=files,
                        relationships=relationships)
    problems = validate_full_spdx_document(document)
    if problems:
        shown = "; ".join(f"{p.context.spdx_id or ''}: {p.validation_message}" for p in problems[:5])
        raise SbomError(f"SPDX document for {info.filename} is invalid ({len(problems)}): {shown}")
    return DocumentConverter().convert(document)


def _license(expression: str | None):
    if not expression:
        return SpdxNoAssertion()
    try:
        return get_spdx_licensing().parse(expression, validate=True)
    except ExpressionError:
        return SpdxNoAssertion()


def _purl(name: str, version: str | None) -> ExternalPackageRef:
    locator = f"pkg:pypi/{name.lower()}" + (f"@{version}" if version else "")
    return ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", locator)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", text)

