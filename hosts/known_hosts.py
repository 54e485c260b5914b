"""Pinned host keys: lookup in an OpenSSH known_hosts file, fingerprints, explicit trust."""
from __future__ import annotations

import base64
import hashlib
import os
import socket
from pathlib import Path

import paramiko

from hosts.errors import HostError


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH style: 'SHA256:<base64 without padding>' prefixed by the key type."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def entry_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def pinned_keys(known_hosts: str | Path, address: str, port: int) -> dict[str, paramiko.PKey]:
    """Key type -> pinned key for this address and port ({} when none or no file)."""
    path = Path(known_hosts)
    if not path.exists():
        return {}
    keys = paramiko.HostKeys(str(path))
    return dict(keys.lookup(entry_name(address, port)) or {})


def fetch_host_key(address: str, port: int, timeout: float = 10.0) -> paramiko.PKey:
    """The key a server offers, without authenticating (for `assay hosts trust`)."""
    sock = socket.create_connection((address, port), timeout=timeout)
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.start_client(timeout=timeout)
        return transport.get_remote_server_key()
    except (paramiko.SSHException, OSError) as e:
        raise HostError(f"could not read the host key of {address}:{port}: {e}") from e
    finally:
        transport.close()


def record_key(known_hosts: str | Path, address: str, port: int, key: paramiko.PKey) -> None:
    """Pin key for address:port, replacing any key of the same type; written atomically."""
    path = Path(known_hosts)
    keys = paramiko.HostKeys(str(path)) if path.exists() else paramiko.HostKeys()
    name = entry_name(address, port)
    existing = dict(keys.lookup(name) or {})
    existing[key.get_name()] = key
    # HostKeys has no removal API; rebuild the file without this name's old lines.
    kept = [e for e in keys._entries if name not in e.hostnames]
    fresh = paramiko.HostKeys()
    fresh._entries = kept
    for k in existing.values():
        fresh.add(name, k.get_name(), k)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fresh.save(str(tmp))
    os.replace(tmp, path)
