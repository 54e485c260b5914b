"""The two build hosts of `[build] hosts`, opened for one use and closed after it, always.

A name is `local` (this machine), `container` (a build-host container, hosts/build_container.py:
its own hostname, no network, this machine's build toolchain mounted read-only; started here and
removed on leaving, whatever happened), or a host of the inventory (flows/hostmap.py). When no
docker daemon answers, `container` falls back to this machine, and the build receipt says so in
its `placement`.
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from builders import variations
from flows.config import Config
from flows.hostmap import host_for
from hosts.base import Host
from hosts.local import LocalHost

CONTAINER = "container"
ON_THIS_MACHINE = ("local", CONTAINER)  # names whose builds may use this machine's paths


@dataclass(frozen=True)
class BuildHosts:
    hosts: tuple[Host, Host]
    pythons: tuple[str | None, str | None]
    placements: tuple[dict, dict]


@contextmanager
def opened(cfg: Config, log: Callable[[str], None] = print) -> Iterator[BuildHosts]:
    """Both build hosts, ready; every container started here is removed on leaving."""
    with ExitStack() as stack:
        hosts, pythons, placements = [], [], []
        for i, name in enumerate(cfg.build_hosts):
            python = cfg.build_pythons[i]
            if name == CONTAINER:
                host, placement = _container(stack, i, python, cfg.state_dir / "testbed", log)
                python = python or sys.executable  # the same interpreter, mounted at the same path
            else:
                host = host_for(cfg, name)
                stack.callback(host.close)
                placement = {"kind": "local" if isinstance(host, LocalHost) else "inventory", "host": name}
            hosts.append(host)
            pythons.append(python)
            placements.append(placement)
        yield BuildHosts(tuple(hosts), tuple(pythons), tuple(placements))


def _container(stack: ExitStack, index: int, python: str | None, cache: Path, log) -> tuple[Host, dict]:
    from hosts import build_container

    why = build_container.docker_unavailable()
    if why is not None:
        log(f"build host {CONTAINER!r}: {why}; building on this machine instead")
        return LocalHost(name=CONTAINER), {"kind": "local", "host": CONTAINER, "fallback": why}
    side = "b" if index else "a"
    hostname = variations.HOSTNAMES[side]
    host = stack.enter_context(build_container.build_container(CONTAINER, hostname, python=python or sys.executable,
                                                               cache=cache, log=log))
    return host, {"kind": "container", "host": CONTAINER, "hostname": hostname,
                  "image": "the root filesystem image of hosts/rootfs_image.py; no network; "
                           "the build toolchain mounted read-only"}
