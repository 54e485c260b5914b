"""Typed errors of hosts/: each carries what a person needs to act on it."""
from __future__ import annotations


def _tail(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


class HostError(Exception):
    """Base of every error raised by hosts/."""


class HostLost(HostError):
    def __init__(self, host: str, command: object, detail: str = "") -> None:
        self.host, self.command, self.detail = host, command, detail
        super().__init__(f"host {host!r} lost while running {command!r}" + (f": {detail}" if detail else ""))


class CommandTimeout(HostError):
    def __init__(self, host: str, command: object, timeout: float, stdout: str = "", stderr: str = "") -> None:
        self.host, self.command, self.timeout = host, command, timeout
        self.stdout, self.stderr = stdout, stderr
        super().__init__(f"command {command!r} on host {host!r} exceeded its timeout of {timeout:g}s "
                         "and was killed with its process group")


class CommandFailed(HostError):
    def __init__(self, host: str, command: object, exit_code: int, stderr_tail: str) -> None:
        self.host, self.command, self.exit_code = host, command, exit_code
        self.stderr_tail = _tail(stderr_tail)
        super().__init__(f"command {command!r} on host {host!r} exited {exit_code}: {self.stderr_tail.strip()}")


class HostKeyRejected(HostError):
    """The host offered a key that is not pinned (pinned is None) or differs from the pinned one."""

    def __init__(self, host: str, offered: str, pinned: str | None, known_hosts: str = "") -> None:
        self.host, self.offered, self.pinned, self.known_hosts = host, offered, pinned, known_hosts
        if pinned is None:
            why = f"offered an unknown host key {offered} (none pinned in {known_hosts or 'known_hosts'})"
        else:
            why = f"offered host key {offered}, but {pinned} is pinned in {known_hosts or 'known_hosts'}"
        super().__init__(f"host {host!r} {why}; run `assay hosts trust {host}` only if the new key is expected")


class LeaseHeld(HostError):
    def __init__(self, holder: dict | str, host: str = "", path: str = "", detail: str = "") -> None:
        self.holder, self.host, self.path = holder, host, path
        super().__init__(f"lease {path!r} on host {host!r} is held by {holder}" + (f" ({detail})" if detail else ""))


class LeaseLost(HostError):
    """Our own lease vanished or was taken over while we held it."""


class TransferError(HostError):
    def __init__(self, host: str, path: str, detail: str) -> None:
        self.host, self.path, self.detail = host, path, detail
        super().__init__(f"transfer of {path!r} on host {host!r} failed: {detail}")


class InventoryError(HostError):
    def __init__(self, file: str, key_path: str, message: str) -> None:
        self.file, self.key_path, self.message = file, key_path, message
        super().__init__(f"{file}: at {key_path or '/'}: {message}")


class RestoreIncomplete(HostError):
    """A restore could not prove the host is back as it was found."""

    def __init__(self, host: str, remaining: list[str]) -> None:
        self.host, self.remaining = host, list(remaining)
        lines = "\n  ".join(self.remaining)
        super().__init__(f"RESTORE INCOMPLETE on host {host!r}: {len(self.remaining)} difference(s) remain:\n  {lines}")


class PowerControlRefused(HostError):
    """A power-limit change was asked for without the explicit permission it needs."""
