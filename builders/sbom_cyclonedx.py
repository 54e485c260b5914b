"""CycloneDX 1.5 JSON for a wheel, built with cyclonedx-python-lib and checked by its validator."""
from __future__ import annotations

import datetime as dt
import json
import uuid

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentScope, ComponentType
from cyclonedx.model.license import LicenseExpression
from cyclonedx.output.json import JsonV1Dot5
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from builders.errors import SbomError
from builders.wheel_meta import ArtifactFile, WheelInfo


def cyclonedx_bom(info: WheelInfo, candidate: dict, kernels: ArtifactFile | None = None,
                  resolved: dict | None = None) -> dict:
    """The CycloneDX 1.5 BOM as a JSON-ready dict; raises SbomError if the schema rejects it.
    RESOLVED (builders.resolved_deps.resolve): the versions the dependencies had where the lanes ran."""
    versions = (resolved or {}).get("versions", {})
    created = dt.datetime.fromtimestamp(candidate["source_date_epoch"], dt.timezone.utc)
    purl = PackageURL(type="pypi", name=info.name.lower(), version=info.version)
    files = [Component(type=ComponentType.FILE, name=f.path, bom_ref=f"file:{f.path}",
                       hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)])
             for f in info.files]
    main = Component(
        type=ComponentType.LIBRARY, name=info.name, version=info.version, bom_ref=str(purl),
        purl=purl, description=info.summary or None,
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=info.sha256)],
        licenses=[LicenseExpression(info.license)] if info.license else None,
        properties=[Property(name="assay:wheel", value=info.filename),
                    Property(name="assay:git-commit", value=candidate["commit"]),
                    Property(name="assay:git-tree", value=candidate["tree"])],
        components=files)
    deps = []
    for d in info.dependencies:
        version = versions.get(d.name)
        dep_purl = PackageURL(type="pypi", name=d.name, version=version)
        props = [Property(name="assay:requirement", value=r) for r in d.requirements]
        if resolved is not None:
            props.append(Property(name="assay:resolved-in", value=f"lane environment, python {resolved['python']}"
                                  if version else "not installed in the lane environment"))
        deps.append(Component(
            type=ComponentType.LIBRARY, name=d.name, version=version, bom_ref=str(dep_purl), purl=dep_purl,
            scope=ComponentScope.OPTIONAL if d.optional else ComponentScope.REQUIRED, properties=props))
    # Same wheel bytes -> same serial number; a different wheel can never reuse one.
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"sha256:{info.sha256}"),
              metadata=BomMetaData(component=main, timestamp=created))
    bom.components = deps
    bom.register_dependency(main, deps)
    for dep in deps:
        bom.register_dependency(dep, [])
    if kernels is not None:   # the build's AOT kernels: compiled from this package's source
        kc = Component(type=ComponentType.FILE, name=kernels.name, bom_ref=f"kernels:{kernels.name}",
                       hashes=[HashType(alg=HashAlgorithm.SHA_256, content=kernels.sha256)],
                       properties=[Property(name="assay:kind", value="aot-kernels")])
        bom.components.add(kc)
        bom.register_dependency(kc, [])
    text = JsonV1Dot5(bom).output_as_string()
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text)
    if error is not None:
        raise SbomError(f"CycloneDX BOM for {info.filename} is invalid: {error}")
    return json.loads(text)
