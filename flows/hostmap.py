"""Host names in assay.toml to Host objects: `local` is this machine unless the inventory says
otherwise; every other name comes from the inventory. A build host may also be `container`, a
build-host container started for the build (flows/build_hosts.py opens the two build hosts)."""

from __future__ import annotations

from flows.config import Config, ConfigError
from hosts.local import LocalHost


def host_for(cfg: Config, name: str):
    if cfg.inventory is None:
        if name == "local":
            return LocalHost(name="local")
        raise ConfigError(cfg.file, "build.hosts / lanes.host", f"host {name!r} needs an inventory (set `inventory`)")
    from hosts.inventory import load_inventory

    inventory = load_inventory(cfg.inventory)
    if name == "local" and name not in inventory.hosts:
        return LocalHost(name="local")
    return inventory.connect(name)
