"""Bringing the test bed up and down: N sshd containers reached only through ports published
on 127.0.0.1, fresh keys, and a ready inventory with pinned host keys."""
from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hosts.inventory import toml_str
from hosts.rootfs_image import CACHE_DIR, TestbedError, ensure_image

LABEL = "assay.testbed"


def _client():
    import docker
    return docker.from_env(timeout=60)


def write_client_key(directory: Path) -> tuple[Path, str]:
    """A fresh Ed25519 client key (OpenSSH format, 0600); returns (path, public line)."""
    key = Ed25519PrivateKey.generate()
    path = directory / "id_ed25519"
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    (directory / "id_ed25519.pub").write_bytes(pub + b"\n")
    return path, pub.decode()


def _wait_banner(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.settimeout(2)
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError as e:
            last = str(e)
        time.sleep(0.2)
    raise TestbedError(f"sshd on 127.0.0.1:{port} did not answer within {timeout:g}s ({last})")


def up(count: int, inventory: Path, cache: Path = CACHE_DIR, log=print, ready_timeout: float = 60.0,
       bed_id: str | None = None, volumes: dict[str, str] | None = None) -> Path:
    """Start count containers and write the inventory; returns its path. The containers carry
    the label assay.testbed.bed=<bed_id>, so that one bed can be taken down alone. VOLUMES
    (host path -> container path) are bind-mounted read-only, e.g. this host's interpreter, so that
    the engine's torch can be reused on a test-bed host."""
    client = _client()
    image = ensure_image(client, cache, log)
    inventory = Path(inventory).resolve()
    inventory.parent.mkdir(parents=True, exist_ok=True)
    key_path, pub = write_client_key(inventory.parent)
    bed = bed_id or uuid.uuid4().hex[:8]
    hosts = []
    for i in range(count):
        c = client.containers.run(image, detach=True, name=f"assay-testbed-{bed}-{i}",
                                  labels={LABEL: "1", f"{LABEL}.bed": bed},
                                  environment={"AUTHORIZED_KEY": pub},
                                  ports={"22/tcp": ("127.0.0.1", None)}, init=False,
                                  volumes={h: {"bind": c, "mode": "ro"} for h, c in (volumes or {}).items()})
        c.reload()
        binding = (c.attrs["NetworkSettings"]["Ports"] or {}).get("22/tcp") or []
        if not binding:
            raise TestbedError(f"container {c.name} has no published ssh port")
        hosts.append((f"tb{i}", c, int(binding[0]["HostPort"])))
    lines = []
    for name, c, port in hosts:
        _wait_banner(port, ready_timeout)
        # The key is read through the docker daemon, a channel we already trust, never over ssh.
        code, out = c.exec_run(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])
        if code != 0:
            raise TestbedError(f"cannot read the host key of {c.name}: {out!r}")
        ktype, kdata = out.decode().split()[:2]
        lines.append(f"[127.0.0.1]:{port} {ktype} {kdata}\n")
    (inventory.parent / "known_hosts").write_text("".join(lines))
    doc = ['known_hosts = "known_hosts"', ""]
    for name, c, port in hosts:
        doc += [f"[hosts.{name}]", 'kind = "ssh"', 'address = "127.0.0.1"', f"port = {port}",
                'user = "root"', f"key = {toml_str(key_path.name)}", 'roles = ["builder", "gpu"]',
                'gpu_kind = "testbed"', 'lanes = ["testbed"]', "connect_timeout = 10", "keepalive = 5", "",
                f"[hosts.{name}-docker]", 'kind = "docker"', f"container = {toml_str(c.name)}", ""]
    inventory.write_text("\n".join(doc))
    log(f"test bed {bed}: {count} host(s), inventory {inventory}")
    return inventory


def down(log=print, bed_id: str | None = None) -> int:
    """Remove the test bed's containers (all beds, or only bed_id); returns how many."""
    client = _client()
    gone = 0
    label = f"{LABEL}.bed={bed_id}" if bed_id else LABEL
    for c in client.containers.list(all=True, filters={"label": label}):
        c.remove(force=True)
        gone += 1
    log(f"removed {gone} test bed container(s)")
    return gone
