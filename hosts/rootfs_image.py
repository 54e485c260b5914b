"""The Debian root filesystem image that both the sshd test bed and the build-host container run:
made by debootstrap from the apt mirror this machine uses, imported with `docker import` (no
registry can be reached), cached by a content hash of its recipe."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from hosts.errors import HostError

SUITE = "bookworm"
INCLUDE = ("openssh-server", "python3", "procps", "iproute2")
IMAGE_REPO = "assay-testbed"
# The checkout's .assay/testbed (gitignored) unless ASSAY_TESTBED_CACHE names another place.
CACHE_DIR = Path(os.environ.get("ASSAY_TESTBED_CACHE") or Path(__file__).resolve().parents[1] / ".assay" / "testbed")

# Runs as the container's command: fresh host keys per container, the client key from the
# environment, then sshd in the foreground.
ENTRYPOINT = """#!/bin/sh
set -e
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
rm -f /etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
printf '%s\\n' "$AUTHORIZED_KEY" > /root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
exec /usr/sbin/sshd -D -e -o HostKey=/etc/ssh/ssh_host_ed25519_key -o UseDNS=no \\
     -o ClientAliveInterval=5 -o MaxStartups=50:30:100 -o MaxSessions=50
"""


class TestbedError(HostError):
    """The root filesystem or its image could not be made (debootstrap, tar, docker import)."""


def debian_mirror(paths: list[str] | None = None) -> str:
    """The Debian mirror this machine's apt is configured with (not the security one)."""
    if paths is None:
        paths = sorted(glob.glob("/etc/apt/sources.list.d/*.sources")) + ["/etc/apt/sources.list"]
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for uri in re.findall(r"^URIs:\s*(\S+)", text, re.M) + re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M):
            if "security" not in uri:
                return uri.rstrip("/")
    raise TestbedError("no Debian mirror found in /etc/apt/sources.list*")


def recipe(mirror: str) -> dict:
    return {"suite": SUITE, "variant": "minbase", "include": list(INCLUDE), "mirror": mirror,
            "entrypoint": ENTRYPOINT}


def recipe_hash(r: dict) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()


def _run(argv: list[str], timeout: float) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise TestbedError(f"{argv[0]} exited {proc.returncode}: {proc.stderr[-2000:]}")


def ensure_debootstrap() -> None:
    if shutil.which("debootstrap"):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "debootstrap"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        if proc.returncode != 0:
            raise TestbedError(f"{' '.join(argv)} failed: {proc.stderr[-2000:]}")


def rootfs_tarball(cache: Path = CACHE_DIR, log=print) -> tuple[Path, str]:
    """Build (once) the root filesystem tarball for the recipe; returns (path, recipe hash)."""
    r = recipe(debian_mirror())
    h = recipe_hash(r)
    tar = cache / f"rootfs-{h[:16]}.tar"
    if tar.exists():
        return tar, h
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / f"root-{h[:16]}"
    if not (root / ".debootstrap-complete").exists():
        ensure_debootstrap()
        shutil.rmtree(root, ignore_errors=True)
        log(f"debootstrap {SUITE} from {r['mirror']} (a few minutes, once)")
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE, str(root),
              r["mirror"]], timeout=1800)
        (root / ".debootstrap-complete").write_text(h)
    entry = root / "usr/local/sbin/testbed-start"
    entry.write_text(ENTRYPOINT)
    entry.chmod(0o755)
    partial = tar.with_suffix(".partial")
    _run(["tar", "--numeric-owner", "--exclude=./.debootstrap-complete", "-C", str(root), "-cf", str(partial), "."],
         timeout=600)
    partial.rename(tar)
    shutil.rmtree(root, ignore_errors=True)
    return tar, h


def ensure_image(client, cache: Path = CACHE_DIR, log=print) -> str:
    """The image tag for the current recipe, imported from the cached tarball if missing."""
    import docker.errors

    mirror = debian_mirror()
    tag = f"{IMAGE_REPO}:{recipe_hash(recipe(mirror))[:16]}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    tar, _ = rootfs_tarball(cache, log)
    log(f"docker import {tar.name} as {tag}")
    _run(["docker", "import", "--change", 'CMD ["/usr/local/sbin/testbed-start"]',
          "--change", "LABEL assay.testbed.image=1", str(tar), tag], timeout=600)
    return tag
