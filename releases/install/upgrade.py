"""rollback (current -> previous_release) and upgrade (install + restart, undone as a whole when the
new release does not start)."""
from __future__ import annotations

import time
from pathlib import Path

from releases.install import service
from releases.install.errors import InstallError
from releases.install.installer import activate, created_count, install
from releases.install.journal import Journal
from releases.install.layout import Prefix


def _restart_args(svc: dict) -> dict:
    return {"port": svc["port"], "api_key_file": svc["api_key_file"], "model": svc.get("model"),
            "profile": svc.get("profile")}


def rollback(prefix_dir: str | Path, timeout: float = 300) -> dict:
    """Point `current` back at previous_release (journalled like an install); a running service is
    stopped and started again on the same port from the release rolled back to."""
    prefix = Prefix.at(prefix_dir)
    target, current = prefix.previous_version(), prefix.current_version()
    if target is None:
        raise InstallError("no previous_release to roll back to", where=str(prefix.previous_file))
    if not prefix.python(target).exists():
        raise InstallError(f"previous release {target} is not installed", where=str(prefix.release(target)))
    if Journal.load(prefix) is not None:
        raise InstallError("an interrupted install is pending; run install --repair first", where=str(prefix.journal))
    svc = service.read_service(prefix)
    running = service.is_ours(svc)
    if running:
        service.stop(prefix)
    journal = Journal(prefix, target, f"rollback from {current}")
    journal.save()
    activate(journal)
    journal.commit()
    out = {"status": "rolled_back", "current": target, "previous_release": prefix.previous_version(),
           "rolled_back_from": current}
    if running:
        out["service"] = service.start(prefix, **_restart_args(svc), timeout=timeout)
    return out


def upgrade(url: str, prefix_dir: str | Path, key: str | Path, *, port: int, api_key_file: str,
            model: str | None = None, profile: str | None = None, base_python: str | None = None,
            timeout: float = 300) -> dict:
    """Install URL, stop the running release, start the new one. When the new one does not start,
    the transaction is undone (every target it created deleted, `current` and previous_release
    restored) and the previous release is started again as it ran before."""
    prefix = Prefix.at(prefix_dir)
    t0 = time.monotonic()
    result, journal = install(url, prefix, key, base_python=base_python, commit=False)
    out = {**result, "rolled_back": False, "deleted_targets": 0, "install_s": round(time.monotonic() - t0, 3)}
    svc = service.read_service(prefix)
    was_running = service.is_ours(svc)
    if journal is None and was_running and svc["version"] == result["version"]:
        return {**out, "service": {"status": "already_running", "pid": svc["pid"], "port": svc["port"]}}
    if was_running:
        out["stopped"] = service.stop(prefix)
    try:
        out["service"] = service.start(prefix, port=port, api_key_file=api_key_file, model=model, profile=profile,
                                       timeout=timeout)
    except InstallError as exc:
        service.stop(prefix)   # a half-started engine of the new release, if any
        out["rolled_back"] = True
        out["start_error"] = str(exc)
        out["created_targets"] = created_count(journal) if journal else 0
        out["deleted_targets"] = journal.undo() if journal is not None else 0
        if was_running:
            out["restored"] = service.start(prefix, **_restart_args(svc), version=prefix.current_version(),
                                            timeout=timeout)
        out["status"] = "rolled_back"
        out["current"] = prefix.current_version()
        out["previous_release"] = prefix.previous_version()
        return out
    if journal is not None:
        journal.commit()
    out["upgrade_s"] = round(time.monotonic() - t0, 3)
    return out
