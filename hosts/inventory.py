"""The host inventory (hosts.toml): loaded, validated against inventory.schema.json, and
turned into Host objects. Relative paths in it are relative to the inventory file."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hosts.errors import InventoryError
from hosts.toml_input import pointer, read_toml, short

SCHEMA_PATH = Path(__file__).with_name("inventory.schema.json")


@dataclass
class HostEntry:
    name: str
    kind: str
    address: str | None = None
    port: int = 22
    user: str | None = None
    key: Path | None = None
    known_hosts: Path | None = None
    container: str | None = None
    image: str | None = None
    mounts: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    gpu_kind: str | None = None
    lanes: list[str] = field(default_factory=list)
    power_baseline_w: float | None = None
    connect_timeout: float = 10.0
    keepalive: float = 15.0


@dataclass
class Inventory:
    path: Path
    hosts: dict[str, HostEntry]

    def entry(self, name: str) -> HostEntry:
        try:
            return self.hosts[name]
        except KeyError:
            raise InventoryError(str(self.path), f"/hosts/{name}",
                                 f"no host named {name!r}; known: {', '.join(sorted(self.hosts))}") from None

    def connect(self, name: str):
        return connect(self.entry(name))


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate hosts.toml; every problem is an InventoryError naming the file, the key
    path and what was expected."""
    import jsonschema

    path = Path(path)
    data = read_toml(path, lambda key_path, message: InventoryError(str(path), key_path, message))
    schema = json.loads(SCHEMA_PATH.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(map(str, e.path)))
    if errors:
        e = errors[0]
        raise InventoryError(str(path), pointer(e.absolute_path) or "/",
                             short(f"{e.message} (expected per schema rule {e.validator!r})"))
    base = path.parent
    default_kh = data.get("known_hosts")
    hosts = {}
    for name, h in data["hosts"].items():
        kh = h.get("known_hosts", default_kh)
        hosts[name] = HostEntry(
            name=name, kind=h["kind"], address=h.get("address"), port=h.get("port", 22), user=h.get("user"),
            key=(base / h["key"]) if "key" in h else None, known_hosts=(base / kh) if kh else None,
            container=h.get("container"), image=h.get("image"), mounts=list(h.get("mounts", [])),
            roles=list(h.get("roles", [])), gpu_kind=h.get("gpu_kind"), lanes=list(h.get("lanes", [])),
            power_baseline_w=h.get("power_baseline_w"), connect_timeout=h.get("connect_timeout", 10.0),
            keepalive=h.get("keepalive", 15.0))
        if h["kind"] == "ssh" and hosts[name].known_hosts is None:
            raise InventoryError(str(path), f"/hosts/{name}/known_hosts",
                                 "an ssh host needs a known_hosts file (here or at the top level): keys are pinned")
    return Inventory(path, hosts)


def connect(entry: HostEntry):
    """A Host for an inventory entry (SSH connects lazily on first use)."""
    if entry.kind == "local":
        from hosts.local import LocalHost
        return LocalHost(entry.name)
    if entry.kind == "ssh":
        from hosts.ssh import SSHHost
        return SSHHost(entry.name, entry.address, port=entry.port, user=entry.user, key_path=entry.key,
                       known_hosts=entry.known_hosts, connect_timeout=entry.connect_timeout,
                       keepalive=entry.keepalive)
    from hosts.docker_host import DockerHost
    if entry.container:
        return DockerHost(entry.name, container=entry.container)
    return DockerHost.ephemeral(entry.name, entry.image, mounts=entry.mounts)


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML for the characters we write)."""
    return json.dumps(value)
