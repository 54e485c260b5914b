"""The engine image's own SBOM (CycloneDX 1.5, cyclonedx-python-lib, checked by its validator):
the Debian packages of the base layer as its dpkg status lists them (pkg:deb purls with
versions) and the Python distributions the wheel layer installed (pkg:pypi purls with versions,
from their METADATA), under the image as a container component named by its digest."""
from __future__ import annotations

import datetime as dt
import io
import email.parser
import json
import tarfile
import uuid
from pathlib import Path

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot5
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from builders.errors import SbomError

DPKG_STATUS = "var/lib/dpkg/status"


def dpkg_packages(status: str, distro: str = "debian-12") -> list[Component]:
    """One component per package dpkg's status file calls installed."""
    out = []
    for stanza in status.split("\n\n"):
        fields = dict(email.parser.Parser().parsestr(stanza.strip() + "\n").items()) if stanza.strip() else {}
        if not fields.get("Package") or "installed" not in fields.get("Status", "").split():
            continue
        purl = PackageURL(type="deb", namespace="debian", name=fields["Package"], version=fields["Version"],
                          qualifiers={"arch": fields.get("Architecture", "all"), "distro": distro})
        out.append(Component(type=ComponentType.LIBRARY, name=fields["Package"], version=fields["Version"],
                             bom_ref=str(purl), purl=purl))
    return out


def _layers(image: Path) -> tuple[dict, list[bytes]]:
    with tarfile.open(image, "r:") as t:
        def blob(digest: str) -> bytes:
            return t.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}").read()
        index = json.loads(t.extractfile("index.json").read())
        manifest_digest = index["manifests"][0]["digest"]
        manifest = json.loads(blob(manifest_digest))
        return {"digest": manifest_digest, "ref_name": index["manifests"][0].get("annotations", {}).get(
            "io.containerd.image.name", "image")}, [blob(la["digest"]) for la in manifest["layers"]]


def image_bom(image: Path, source_date_epoch: int) -> dict:
    """The CycloneDX BOM of the OCI image layout tar IMAGE (builders.oci_image) as a JSON-ready dict."""
    try:
        head, layers = _layers(image)
    except (KeyError, IndexError, ValueError, tarfile.TarError, OSError) as exc:
        raise SbomError(f"{image.name}: not an OCI image layout this builder wrote ({exc})") from exc
    components: list[Component] = []
    for layer in layers:
        with tarfile.open(fileobj=io.BytesIO(layer)) as t:
            for m in t.getmembers():
                if m.name == DPKG_STATUS:
                    components += dpkg_packages(t.extractfile(m).read().decode("utf-8", "replace"))
                elif m.name.endswith(".dist-info/METADATA") and "/dist-packages/" in m.name:
                    meta = email.parser.Parser().parsestr(t.extractfile(m).read().decode("utf-8", "replace"))
                    purl = PackageURL(type="pypi", name=meta["Name"].lower().replace("_", "-"), version=meta["Version"])
                    components.append(Component(type=ComponentType.LIBRARY, name=meta["Name"], version=meta["Version"],
                                                bom_ref=str(purl), purl=purl,
                                                properties=[Property(name="assay:installed-at", value=m.name.rsplit("/", 2)[0])]))
    if not components:
        raise SbomError(f"{image.name}: no dpkg status and no installed distribution found in its layers")
    name, _, tag = head["ref_name"].partition(":")
    main = Component(type=ComponentType.CONTAINER, name=name, version=tag or None, bom_ref=head["digest"],
                     hashes=[HashType(alg=HashAlgorithm.SHA_256, content=head["digest"].removeprefix("sha256:"))],
                     properties=[Property(name="assay:image-digest", value=head["digest"])])
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, head["digest"]),
              metadata=BomMetaData(component=main,
                                   timestamp=dt.datetime.fromtimestamp(source_date_epoch, dt.timezone.utc)))
    bom.components = components
    bom.register_dependency(main, components)
    text = JsonV1Dot5(bom).output_as_string()
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text)
    if error is not None:
        raise SbomError(f"CycloneDX BOM for {image.name} is invalid: {error}")
    return json.loads(text)
