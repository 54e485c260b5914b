"""The root filesystem the engine's OCI image is built on (`[build] image`, builders.oci_image):
the same debootstrap root fs as the build-host container and the test bed (hosts/rootfs_image.py),
read back once from its docker image and kept in the state directory."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from builders import oci_image
from flows.config import Config


def image_base(cfg: Config, log: Callable[[str], None] = print) -> Path | None:
    """The base tarball, or None when the config asks for no image or no docker daemon answers
    (then the run builds no image and says so in its log, as a fallen-back build b does)."""
    if not cfg.build_image:
        return None
    from hosts import build_container

    why = build_container.docker_unavailable()
    if why is not None:
        log(f"engine image: {why}; this run builds no image")
        return None
    import docker

    from hosts.rootfs_image import ensure_image

    tag = ensure_image(docker.from_env(), cfg.state_dir / "testbed", log=log)
    out = cfg.state_dir / "image-base" / f"rootfs-{tag.rpartition(':')[2]}.tar"
    if not out.exists():
        partial = out.with_name(out.name + ".partial")
        oci_image.rootfs_from_docker_image(tag, partial)
        partial.rename(out)
    return out
