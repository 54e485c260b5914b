"""The build-host container: a second machine for build b, started for the build and removed after.

It runs the root filesystem image the sshd test bed runs (hosts/rootfs_image.py) through the
docker SDK (DockerHost), with
  - its own hostname (a real one: the container's UTS name, not a variable),
  - no network at all: nothing can be pulled during a build,
  - the build toolchain bind-mounted read-only at the paths it has here: the interpreter's
    environment (a venv: python + build + hatchling + triton) and the base installation it was
    made from, so the container runs the very same interpreter and packages; and the variation
    tools (libfaketime, disorderfs) with the shared libraries they need that the image lacks,
  - CAP_SYS_ADMIN, no seccomp/apparmor filter and /dev/fuse, so that the build's own
    variations (a UTS and a user namespace, a disorderfs mount) can be made inside it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from hosts.docker_host import EPHEMERAL_LABEL, DockerHost
from hosts.errors import HostError
from hosts.rootfs_image import CACHE_DIR, ensure_image

# Tools the build variations call on the build host, found on this machine's PATH.
VARIATION_TOOLS = ("faketime", "disorderfs", "fusermount")
# Libraries every image has; mounting this machine's copies over them is never needed.
_BASE_LIBS = ("libc.so", "libm.so", "ld-linux", "libpthread.so", "libdl.so", "librt.so", "libgcc_s.so",
              "libstdc++.so")
_FAKETIME_LIBS = "/usr/lib/x86_64-linux-gnu/faketime"  # faketime(1) preloads from this fixed path


class BuildContainerError(HostError):
    """The build-host container could not be started or made ready."""


def docker_unavailable() -> str | None:
    """Why a build container cannot be started here, or None when the docker daemon answers."""
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as e:  # the SDK raises DockerException, requests and OS errors alike
        return f"no docker daemon answers ({type(e).__name__}: {str(e)[:160]})"
    return None


def toolchain_mounts(python: str = sys.executable) -> list[str]:
    """Read-only binds ('src:dst:ro') that let PYTHON and the variation tools run unchanged in
    the container (the image is the same Debian release as this machine's)."""
    prefix = Path(_prefix_of(python, "sys.prefix"))
    base = Path(_prefix_of(python, "sys.base_prefix"))
    mounts = {str(prefix)}
    if base != prefix and not str(base).startswith("/usr"):
        mounts.add(str(base))  # a venv of a python built elsewhere (pyenv, /opt): bring it along
    for tool in VARIATION_TOOLS:
        path = shutil.which(tool)
        if path is None:
            continue  # the probe inside the container will record the variation as not varied
        mounts.add(os.path.realpath(path))
        mounts.update(_extra_libs(path))
    if Path(_FAKETIME_LIBS).is_dir():
        mounts.add(_FAKETIME_LIBS)
    return [f"{m}:{m}:ro" for m in sorted(mounts)]


def _prefix_of(python: str, attr: str) -> str:
    out = subprocess.run([python, "-c", f"import sys; print({attr})"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise BuildContainerError(f"the build interpreter {python} does not run: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


def _extra_libs(binary: str) -> set[str]:
    """The shared libraries BINARY loads that are not part of every image (ldd)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
    libs = set()
    for line in out.stdout.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            lib = parts[1].split()[0]
            if not any(b in Path(lib).name for b in _BASE_LIBS):
                libs.add(os.path.realpath(lib))
                libs.add(lib)
    return {lib for lib in libs if Path(lib).exists()}


def start(name: str, hostname: str, *, python: str = sys.executable, cache: Path | None = None, client=None,
          log=print) -> DockerHost:
    """A fresh build-host container named for NAME with HOSTNAME; close() removes it. CACHE is where
    the root filesystem is made the first time (default: rootfs_image.CACHE_DIR)."""
    import docker

    client = client or docker.from_env(timeout=120)
    image = ensure_image(client, cache or CACHE_DIR, log=log)
    mounts = toolchain_mounts(python)
    devices = ["/dev/fuse:/dev/fuse:rwm"] if Path("/dev/fuse").exists() else []
    try:
        c = client.containers.run(image, ["sleep", "infinity"], detach=True, hostname=hostname,
                                  name=f"assay-build-{name}-{os.urandom(4).hex()}",
                                  labels={EPHEMERAL_LABEL: name, "assay.build-host": "1"},
                                  network_mode="none", volumes=mounts, devices=devices, cap_add=["SYS_ADMIN"],
                                  security_opt=["seccomp=unconfined", "apparmor=unconfined"])
    except docker.errors.DockerException as e:
        raise BuildContainerError(f"could not start the build-host container from {image}: {e}") from None
    host = DockerHost(name, container=c.name, client=client, _owned=True)
    try:
        check = host.run([python, "-c", "import build, hatchling, triton, platform; "
                          "print(platform.python_version(), triton.__version__)"], timeout=120)
        if check.exit_code != 0:
            raise BuildContainerError(f"the build toolchain {python} does not run in the build-host container "
                                      f"({image}): {check.stderr.strip()[-400:]}")
    except BaseException:
        host.close()
        raise
    return host


@contextmanager
def build_container(name: str, hostname: str, *, python: str = sys.executable, cache: Path | None = None,
                    log=print) -> Iterator[DockerHost]:
    """start(), and the container removed afterwards whatever happened."""
    host = start(name, hostname, python=python, cache=cache, log=log)
    try:
        yield host
    finally:
        host.close()

