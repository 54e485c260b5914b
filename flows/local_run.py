"""`make run` and `make stop`: the main job on the embedded defaults, end to end, the way a person
would drive it — server, deployments, worker, `prefect deployment run`, `assay approve`, verify."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from flows.config import load_config, project_root
from flows.services import (free_port, port_is_free, prefect_env, read_pidfile, running, start_server, start_worker,
                            stop_all)

POOL = "assay-local"
DEPLOYMENT = "release-candidate/local"
OPERATOR = "local-operator"
# Lines hold paths and commands to copy: never wrapped. They also hold run names, state messages and
# paths that others chose: never read as markup or emoji codes.
console = Console(soft_wrap=True, markup=False, emoji=False, highlight=False)


def _prefect(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    proc = subprocess.run([sys.executable, "-m", "prefect", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"prefect {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def worker_env() -> dict[str, str]:
    """What the local worker's environment sets beyond Prefect's own settings.

    `make run` waits on the worker's poll twice (the run, then its resume after approval), and
    Prefect's default of 10 s a poll was up to 20 s of it. A poll every 2 s, as the e2e tests'
    workers use, is one small query to the local server; a value set in the environment is kept."""
    return {"PREFECT_WORKER_QUERY_SECONDS": os.environ.get("PREFECT_WORKER_QUERY_SECONDS", "2")}


def _ensure_services(state: Path, root: Path) -> tuple[str, dict[str, str], list[str]]:
    """Server, pool, deployments and worker, each started unless running. When the last worker
    died, the runs it left are retried on the new one (flows/recovery.py); their ids are returned."""
    run_dir, home, logs = state / "run", state / "prefect", state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stale = lambda why: console.print(Text(why))  # noqa: E731
    server = running(run_dir, "prefect-server", on_stale=stale)
    if server:
        api_url = server.url
        console.print(f"Prefect server already running at {api_url}")
    else:
        port = int(os.environ.get("ASSAY_PREFECT_PORT", "4200"))
        if not port_is_free(port):
            port = free_port()
        shown = home.relative_to(root) if home.is_relative_to(root) else home  # a CONFIG may keep its state elsewhere
        console.print(f"Starting the Prefect server on 127.0.0.1:{port} (SQLite under {shown}/) ...")
        server, _ = start_server(home, run_dir, port, logs / "prefect-server.log")
        api_url = server.url
    env = prefect_env(home, api_url)
    env["ASSAY_ROOT"] = str(root)
    known = subprocess.run([sys.executable, "-m", "prefect", "work-pool", "inspect", POOL], env=env, cwd=root,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if known.returncode != 0:
        _prefect(["work-pool", "create", POOL, "--type", "process"], env, root)
    console.print("Registering the deployments of prefect.yaml ...")
    _prefect(["--no-prompt", "deploy", "--all"], env, root)
    previous, retried = read_pidfile(run_dir, "prefect-worker"), []
    if not running(run_dir, "prefect-worker", on_stale=stale):
        start_worker(home, run_dir, api_url, POOL, root, logs / "prefect-worker.log", results=state / "results",
                     env=worker_env())
        console.print(f"Started a process worker on pool {POOL}")
        if previous is not None and previous.worker:
            from prefect.settings import PREFECT_API_URL, temporary_settings

            from flows.recovery import retry_orphaned

            with temporary_settings(updates={PREFECT_API_URL: api_url}):
                retried = retry_orphaned(POOL, previous.worker, say=lambda line: console.print(Text(line)))
    return api_url, env, retried


def _head_version(cfg) -> str | None:
    """The version the release flow gives the checked-out commit (its first task runs the same
    freeze), or None when HEAD cannot be frozen: then the run itself reports why."""
    from builders import snapshot
    from builders.errors import DirtySource, SnapshotError

    try:
        return snapshot.freeze(cfg.source, ref="HEAD", subdir=cfg.subdir,
                               version_label=cfg.version_label)["release_version"]
    except (DirtySource, SnapshotError):
        return None


def _already_published(cfg) -> int | None:
    """When HEAD's release is in the store already, say where it is and verify it: a published
    release is never replaced, so there is nothing to run. None when there is work to do."""
    from flows.stores import open_store, store_location

    version = _head_version(cfg)
    if version is None:
        return None
    store = open_store(cfg)
    if not store.exists(f"{version}/manifest.json"):
        from releases.publish import unfinished_versions

        if version in unfinished_versions(store):
            console.print(Text(f"An unfinished publish of {version} is in the store (a run stopped part-way); "
                               "this run completes it."))
        return None
    console.print(Text(f"Release {version} of this commit is already published: {_shown(cfg, store_location(store, version))}"))
    console.print("A published release is never replaced; nothing to build. Verifying it:")
    return _verify_published(cfg, store, version)


def _shown(cfg, location: str) -> str:
    path = Path(location)
    return str(path.relative_to(cfg.root)) if path.is_absolute() and path.is_relative_to(cfg.root) else location


def _verify_published(cfg, store, version: str) -> int:
    """`assay verify --require-ready` on the store's copy (downloaded first when it is remote)."""
    import tempfile

    from releases.stores import LocalStore

    with tempfile.TemporaryDirectory(prefix="assay-verify-") as tmp:
        if isinstance(store, LocalStore):
            target = _shown(cfg, str(store.root / version))
        else:
            for key in store.list(f"{version}/"):
                store.get_file(key, Path(tmp) / key)
            target = str(Path(tmp) / version)
        # The trust root is this checkout's release key, as for a release make run publishes itself.
        key = cfg.keys_dir / "release.pub.pem"
        pinned = ["--key", _shown(cfg, str(key))] if key.is_file() else []
        console.print(Text("  $ assay verify --require-ready " + " ".join(pinned + [target])))
        verify = [str(Path(sys.executable).with_name("assay")), "verify", "--require-ready", *pinned, target]
        return subprocess.run(verify, cwd=cfg.root, timeout=300).returncode


def start(config: str | None = None) -> int:
    """The main job on `config` (an assay.toml; default: the embedded defaults)."""
    root = project_root()
    cfg = load_config(config)
    done = _already_published(cfg)
    if done is not None:
        return done
    api_url, env, retried = _ensure_services(cfg.state_dir, root)
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    # This process speaks to the server it started, never to an in-process ephemeral one.
    with temporary_settings(updates={PREFECT_API_URL: api_url, PREFECT_HOME: env["PREFECT_HOME"]}):
        release_runs = [r for r in retried if _is_release_run(r)]
        if release_runs:  # the run a dead worker left goes on; a second run would build it all again
            run_id = release_runs[0]
            console.print(f"Following the retried run {run_id} instead of starting another")
            return _follow_and_approve(cfg, api_url, env, run_id)
        return _follow_and_approve(cfg, api_url, env, _trigger(env, root, config))


def _is_release_run(run_id: str) -> bool:
    from uuid import UUID

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(run_id))
        return client.read_flow(run.flow_id).name == DEPLOYMENT.split("/")[0]


def _trigger(env: dict[str, str], root: Path, config: str | None = None) -> str:
    # The worker runs the flow from the repository root: the config goes as an absolute path.
    params = ["--param", f"config={Path(config).resolve()}"] if config else []
    out = _prefect(["deployment", "run", DEPLOYMENT, *params], env, root)
    match = re.search(r"UUID:\s*([0-9a-f-]{36})", out)
    if not match:
        raise SystemExit(f"could not read the flow run id from `prefect deployment run`:\n{out}")
    run_id = match.group(1)
    console.print(f"Triggered {DEPLOYMENT}: flow run {run_id}")
    return run_id


def _follow_and_approve(cfg, api_url: str, env: dict[str, str], run_id: str) -> int:
    ui = api_url.removesuffix("/api") + f"/runs/flow-run/{run_id}"
    console.print(f"  UI: {ui}")
    from flows.runs import LogFollower, wait_for_state

    show = lambda state, message: console.print(f"  state: {state}" + (f" ({message})" if message else ""))
    progress = _progress_printer(LogFollower(run_id))
    state = wait_for_state(run_id, {"PAUSED"}, timeout_s=3600, on_change=show, on_poll=progress)
    if state != "PAUSED":
        console.print(Text(f"the run ended {state} before the approval gate; see {ui}", style="red"))
        return 1
    console.print(f"The run waits for approval. Approving as {OPERATOR}, as a person would:")
    approve = [str(Path(sys.executable).with_name("assay")), "approve", run_id, "--as", OPERATOR,
               "--reason", "make run: the embedded defaults, approved by the local operator"]
    console.print("  $ assay approve " + shlex.join(approve[2:]))
    subprocess.run(approve, env={**os.environ, **env}, check=True, timeout=120)
    state = wait_for_state(run_id, set(), timeout_s=3600, on_change=show, on_poll=progress)
    console.print(f"\nFlow run {run_id}: {state}\n  UI: {ui}")
    if state != "COMPLETED":
        return 1
    return _report_published(cfg, run_id)


# What of the run's log a person watching `make run` wants: the run starting, each build's milestones,
# each lane's phases, the acceptance window's steps, the upgrade rehearsal, the approval wait and
# the uploads (the rest of the build's own output stays in the UI: hundreds of lines when one fails).
_PROGRESS = re.compile(r"^(Beginning flow run |build \S+: (\* |Successfully built|aot_build: )|lane \S+: "
                       r"|acceptance \S+: |rehearsal |Release .* waits|uploaded \d+/)")


def _progress_printer(follower):
    def show() -> None:
        try:
            lines = follower.new_lines()
        except Exception as exc:  # progress is a courtesy: a failed read must not stop the run's watch
            console.print(Text(f"  (progress unavailable: {exc})"))
            return
        for line in lines:
            if _PROGRESS.search(line):
                console.print(Text("  " + line.splitlines()[0][:200]))
    return show


def _report_published(cfg, run_id: str) -> int:
    import json

    from flows.workspace import Workspace

    summary = json.loads(Workspace.for_run(cfg, run_id).summary.read_text())
    version, path = summary["version"], Path(summary["location"])
    if path.is_relative_to(cfg.root):
        path = path.relative_to(cfg.root)
    console.print(f"  published release {version}: {path}")
    key = cfg.keys_dir / "release.pub.pem"
    if key.is_relative_to(cfg.root):
        key = key.relative_to(cfg.root)
    verify = [str(Path(sys.executable).with_name("assay")), "verify", "--require-ready", "--key", str(key), str(path)]
    console.print(f"  $ assay verify --require-ready --key {key} {path}")
    result = subprocess.run(verify, timeout=300, cwd=cfg.root)  # the paths shown are relative to the config's root
    console.print(f"\nThe Prefect server stays up for you at {_ui_root(cfg)}; `make stop` ends it.")
    return result.returncode


def _ui_root(cfg) -> str:
    server = running(cfg.state_dir / "run", "prefect-server")
    return server.url.removesuffix("/api") if server and server.url else "(not running)"


def stop(config: str | None = None) -> int:
    stopped = stop_all(load_config(config).state_dir / "run", on_stale=lambda why: console.print(Text(why)))
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def main(argv: list[str]) -> int:
    """`start|stop [--config FILE]` (`make run CONFIG=FILE`); a bad config is named, exit 2."""
    from flows.config import ConfigError

    config = None
    if len(argv) == 3 and argv[1] == "--config" and argv[2]:
        config = argv[2]
    elif len(argv) != 1:
        argv = []
    try:
        if argv[:1] == ["start"]:
            return start(config)
        if argv[:1] == ["stop"]:
            return stop(config)
    except ConfigError as exc:
        console.print(Text(f"config: {exc}", style="red"))
        return 2
    print("usage: python -m flows.local_run start|stop [--config FILE]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
