"""Two OCI image layout tars (builders.oci_image) compared inside: the image config, then each
layer, member by member, named "layer N (ROLE)/MEMBER". Comparing the outer tar alone would
only say that blobs/sha256/<one digest> became blobs/sha256/<another>."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from builders.diffutil import content_detail, difference
from builders.errors import CompareError
from builders.targz_diff import diff_tar


def _read(path: Path) -> tuple[dict, list[bytes], list[str]]:
    """(config without its diff ids, layer tars, layer roles) of the image in PATH."""
    try:
        with tarfile.open(path, "r:") as t:
            def blob(digest: str) -> bytes:
                return t.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}").read()
            index = json.loads(t.extractfile("index.json").read())
            manifest = json.loads(blob(index["manifests"][0]["digest"]))
            config = json.loads(blob(manifest["config"]["digest"]))
            layers = [blob(la["digest"]) for la in manifest["layers"]]
    except (KeyError, IndexError, AttributeError, ValueError, tarfile.TarError) as exc:
        raise CompareError(f"{path.name}: not an OCI image layout this builder wrote ({exc})") from exc
    roles = [h.get("created_by", "") for h in config.get("history", [])]
    roles = ["base" if r.startswith("debootstrap") else "wheel" if r.startswith("install") else "layer" for r in roles]
    config.get("rootfs", {}).pop("diff_ids", None)
    return config, layers, roles + ["layer"] * (len(layers) - len(roles))


def diff_oci(path_a: Path, path_b: Path) -> list[dict]:
    config_a, layers_a, roles = _read(path_a)
    config_b, layers_b, _ = _read(path_b)
    diffs = []
    if config_a != config_b:
        ja, jb = (json.dumps(c, sort_keys=True, indent=1).encode() for c in (config_a, config_b))
        diffs.append(difference("config", "content", content_detail(ja, jb)))
    if len(layers_a) != len(layers_b):
        diffs.append(difference("manifest", "content", f"{len(layers_a)} layers -> {len(layers_b)} layers"))
    for i, (la, lb) in enumerate(zip(layers_a, layers_b)):
        if la != lb:
            prefix = f"layer {i} ({roles[i]})"
            for d in diff_tar(la, lb):
                diffs.append({**d, "member": f"{prefix}/{d['member']}" if d["member"] else prefix})
    return diffs
