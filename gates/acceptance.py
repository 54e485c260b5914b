"""A lane's acceptance window: what a user does with a staged release, done on the lane's host
inside a lane window (gates/window.py), recorded as the predicate of an `acceptance` receipt
(releases/schemas/acceptance.schema.json, lane form).

In order: open the window (audit's first look, lease, snapshot); download every staged asset
anonymously (gates/staged_downloads.py); stop the incumbent engine when one runs in INCUMBENT_PREFIX
(its service record kept); install with the shipped installer zipapp, run by the host's python3;
start the engine on a free port with an API key file; the auth probe (200 with the key, 401
without) and the openai behaviour gates (gates/acceptance_behaviour.py); the release's
QUICKSTART.md blocks (gates/docs_run.py); stop; start the incumbent again exactly as found (release, port, key file, model, profile) and
check it; close the window (restore) and audit the host independently against the first look.

Every step is a route (name, status, started/ended, facts); a step that raises is recorded as
failed with its error in its facts, the later steps are skipped, and the window is still closed
and audited, so a failure always yields a complete `fail` record. Hosts: the behaviour and auth
gates call the engine from this process on 127.0.0.1, so the window runs on the local host or on
one whose port is forwarded to 127.0.0.1 (a remote lane's tunnel is not built here)."""
from __future__ import annotations

import json
import os
import secrets
import tempfile
import urllib.request
from datetime import datetime, timezone
from typing import Any, Callable

from gates.acceptance_behaviour import auth_statuses, behaviour_gates
from gates.docs_run import run_blocks
from gates.staged_downloads import download_staged
from gates.window import LaneWindow
from hosts import audit
from releases.sums import SUMS_NAME, parse_sums

DOCS_ASSET = "QUICKSTART.md"
INSTALLER_GLOB = ("artifacts/assay-install-", ".pyz")
NOTHING = "0" * 64   # the digest recorded for what never arrived or never ran (never a real sha256 here)
_FREE_PORT = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"


class StepFailed(Exception):
    """A window step that did not do what it must; its message is recorded in the route's facts."""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json_out(res, what: str) -> dict:
    """The one JSON object an installer command printed (its last stdout line)."""
    lines = res.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        out = {}
    if res.exit_code != 0 or out.get("status") == "error":
        raise StepFailed(f"{what} exited {res.exit_code}: {out.get('error') or res.stderr.strip()[-300:]}")
    return out


class _Routes:
    def __init__(self, say: Callable[[str], None]):
        self.routes: list[dict] = []
        self.failure: str | None = None
        self.say = say

    def step(self, name: str, fn: Callable[[], dict]) -> dict | None:
        """Run one step unless an earlier one failed; record it as a route."""
        started = _now()
        if self.failure is not None:
            self.routes.append({"name": name, "status": "skipped", "started_at": started, "ended_at": started,
                                "facts": {"reason": "an earlier step failed"}})
            return None
        try:
            facts = fn() or {}
            status = "pass"
        except Exception as exc:  # recorded: the window still closes and the record says why
            facts = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500]}
            status = "fail"
            self.failure = f"{name}: {facts['error']}"
        self.say(f"acceptance {name}: {status}")
        self.routes.append({"name": name, "status": status, "started_at": started, "ended_at": _now(),
                            "facts": facts})
        return facts if status == "pass" else None


def run_window(host, *, candidate_ref: dict, host_label: str, staged_url: str, key_pem: str | bytes, lane: str,
               workdir: str, lease_path: str, run_id: str, max_hold_s: float, attempt: int = 1,
               model: str | None = None, base_python: str | None = None, incumbent_prefix: str | None = None,
               python: str = "python3", timeout_s: float = 600.0,
               progress: Callable[[str], None] | None = None) -> tuple[dict, dict]:
    """Returns (predicate, details): the `acceptance` receipt's predicate for LANE, and what decided
    it (the failing step, per-gate details). KEY_PEM: the release's public key (PEM text or bytes),
    the one a user is told to trust; it is copied onto the host. STAGED_URL ends in '/'."""
    say = progress or (lambda line: None)
    url = staged_url if staged_url.endswith("/") else staged_url + "/"
    work = workdir.rstrip("/")
    prefix, dl = f"{work}/prefix", f"{work}/dl"
    window = LaneWindow(host, lane=lane, run_id=run_id, lease_path=lease_path, workdir=work, progress=say)
    r = _Routes(say)
    st: dict[str, Any] = {"downloads": [], "auth": {"authenticated_status": 0, "anonymous_status": 0},
                          "behaviour": [], "docs": {"asset": DOCS_ASSET, "sha256": NOTHING, "blocks": []},
                          "assets": []}
    details: dict[str, Any] = {}
    incumbent: dict[str, Any] = {}   # the incumbent's service as found, once this window stopped it
    window.open()
    try:
        with urllib.request.urlopen(url + SUMS_NAME, timeout=60) as resp:
            sums_bytes = resp.read()
        listed = parse_sums(sums_bytes)
        installer = next((rel for rel in sorted(listed)
                          if rel.startswith(INSTALLER_GLOB[0]) and rel.endswith(INSTALLER_GLOB[1])), None)
        host.mkdir(work)

        if incumbent_prefix:
            def stop_incumbent():
                if installer is None:
                    raise StepFailed("no installer asset to stop the incumbent with")
                svc = _incumbent_service(host, python, f"{dl}/{installer}", incumbent_prefix)
                if svc is None:
                    return {"running": False}   # nothing runs there: nothing to stop or restore
                res = host.run([python, f"{dl}/{installer}", "stop", "--prefix", incumbent_prefix, "--json"],
                               timeout=120)
                stopped = _json_out(res, "installer stop (incumbent)").get("status")
                incumbent.update(svc)
                return {"running": True, "stopped": stopped, "version": svc["version"], "port": svc["port"]}

        def downloads():
            # the schema wants a digest for every row: one that never arrived is recorded as all
            # zeros with matched false (staged_downloads gives "" for it)
            st["downloads"] = [{**row, "sha256": row["sha256"] or NOTHING}
                               for row in download_staged(host, url, dl, sums_bytes, timeout_s=timeout_s)]
            # the predicate's assets are the shipped artifacts (releases/verify/records.py binds each
            # to the manifest's artifacts by name and digest); downloads cover every listed file
            st["assets"] = [{"name": rel, "sha256": listed[rel]} for rel in sorted(listed) if rel.startswith("artifacts/")]
            bad = [row["name"] for row in st["downloads"] if not row["matched"]]
            if bad:
                raise StepFailed(f"did not match {SUMS_NAME}: {', '.join(bad)}")
            if installer is None:
                raise StepFailed(f"{SUMS_NAME} lists no installer (assay-install-<version>.pyz)")
            return {"files": len(st["downloads"])}

        r.step("download", downloads)
        if incumbent_prefix:
            r.step("stop-incumbent", stop_incumbent)

        def install():
            key_path = f"{work}/release.pub.pem"
            _put_text(host, key_path, key_pem if isinstance(key_pem, str) else key_pem.decode("utf-8"))
            argv = [python, f"{dl}/{installer}", "install", url, "--prefix", prefix, "--key", key_path, "--json"]
            out = _json_out(host.run(argv + (["--base-python", base_python] if base_python else []),
                                     timeout=timeout_s), "installer install")
            return {"status": out.get("status"), "version": out.get("version")}

        r.step("install", install)
        key = "acc-" + secrets.token_hex(16)
        key_file = f"{work}/api-key"

        def start():
            _put_text(host, key_file, key + "\n")
            port = int(host.run([python, "-c", _FREE_PORT], timeout=30).check().stdout.strip())
            argv = [python, f"{dl}/{installer}", "start", "--prefix", prefix, "--port", str(port),
                    "--api-key-file", key_file, "--json"] + (["--model", model] if model else [])
            out = _json_out(host.run(argv, timeout=timeout_s), "installer start")
            st["url"] = f"http://127.0.0.1:{port}"
            return {"port": port, "version": (out.get("service") or out).get("version")}

        r.step("start", start)

        def auth():
            st["auth"] = auth_statuses(st["url"], key)
            if (st["auth"]["authenticated_status"], st["auth"]["anonymous_status"]) != (200, 401):
                raise StepFailed(f"auth probe: {st['auth']} (want 200 with the key, 401 without)")
            return dict(st["auth"])

        def behaviour():
            gates = behaviour_gates(st["url"], key)
            details["behaviour"] = gates
            st["behaviour"] = [{"name": g["name"], "passed": g["passed"]} for g in gates]
            failed = [g["name"] for g in gates if not g["passed"]]
            if failed:
                raise StepFailed("failed: " + ", ".join(failed))
            return {"gates": len(gates)}

        def docs():
            text = host.run(["cat", f"{dl}/artifacts/{DOCS_ASSET}"], timeout=60).check().stdout
            st["docs"] = run_blocks(host, text, DOCS_ASSET, {"ASSAY_URL": st["url"], "ASSAY_API_KEY_FILE": key_file},
                                    say=say)
            failed = [b["index"] for b in st["docs"]["blocks"] if b["exit_status"] != 0]
            if not st["docs"]["blocks"]:
                raise StepFailed(f"{DOCS_ASSET} has no executable block")
            if failed:
                raise StepFailed(f"{DOCS_ASSET} blocks {failed} exited non-zero")
            return {"blocks": len(st["docs"]["blocks"])}

        r.step("auth", auth)
        r.step("behaviour", behaviour)
        r.step("docs", docs)
    except Exception as exc:  # before any step (the sums could not be read): still a complete fail record
        r.failure = r.failure or f"setup: {type(exc).__name__}: {exc}".splitlines()[0][:500]
        now = _now()
        r.routes.append({"name": "setup", "status": "fail", "started_at": now, "ended_at": now,
                         "facts": {"error": r.failure}})
    finally:
        if "url" in st:   # stop what this window started, through the installer, before the restore
            stopped = r.failure
            r.failure = None
            r.step("stop", lambda: {"status": _json_out(host.run(
                [python, f"{dl}/{installer}", "stop", "--prefix", prefix, "--json"], timeout=120),
                "installer stop").get("status")})
            r.failure = stopped or r.failure
        if incumbent:   # started again as found (same release, port, key file, model, profile), inside the window
            stopped = r.failure
            r.failure = None
            r.step("restore-incumbent", lambda: _restart_incumbent(host, python, f"{dl}/{installer}",
                                                                  incumbent_prefix, incumbent, timeout_s))
            r.failure = stopped or r.failure
        closed = window.close()
        checks = audit.compare(window.audit_before, window.observe())
    audit_ok = audit.passed(checks)
    restore = {"restored": closed["restored"], "audit_passed": audit_ok, "checks": checks}
    hold = float(closed["held_s"] or 0.0)
    problems = ([r.failure] if r.failure else []) + ([] if closed["restored"] else ["restore incomplete"]) \
        + ([] if audit_ok else ["independent audit failed: " + ", ".join(c["name"] for c in checks
                                                                          if c["status"] != "pass")]) \
        + ([f"held the host {hold}s > {max_hold_s}s"] if hold > max_hold_s else [])
    now = _now()
    r.routes.append({"name": "restore-audit", "status": "pass" if closed["restored"] and audit_ok else "fail",
                     "started_at": now, "ended_at": now, "facts": {"restore_diff": closed["restore_diff"]}})
    predicate = {
        "candidate": candidate_ref, "label": lane, "host": host_label, "lane": lane, "attempt": attempt,
        "assets": st["assets"] or [{"name": SUMS_NAME, "sha256": NOTHING}],
        "verdict": "fail" if problems else "pass", "routes": r.routes,
        "window": {**{k: v for k, v in window.lease_record().items() if k in ("opened_at", "closed_at")},
                   "lease": window.lease_record(), "held_s": hold, "max_hold_s": max_hold_s,
                   "restored": closed["restored"], "restore_diff": closed["restore_diff"]},
        "docs": st["docs"], "downloads": st["downloads"], "auth": st["auth"], "behaviour": st["behaviour"],
        "restore": restore, "hold_s": hold, "max_hold_s": max_hold_s}
    details["problems"] = problems
    return predicate, details


def _incumbent_service(host, python: str, installer: str, prefix: str) -> dict | None:
    """The running incumbent's service record (version, port, api_key_file, model, profile), or None
    when no service of that prefix runs."""
    status = _json_out(host.run([python, installer, "status", "--prefix", prefix, "--json"], timeout=60),
                       "installer status (incumbent)")
    svc = status.get("service") or {}
    if not svc.get("running"):
        return None
    return {k: svc.get(k) for k in ("version", "port", "api_key_file", "model", "profile")}


def _restart_incumbent(host, python: str, installer: str, prefix: str, svc: dict, timeout_s: float) -> dict:
    """Start the incumbent as it was found, then check that it runs that release on that port."""
    argv = [python, installer, "start", "--prefix", prefix, "--port", str(svc["port"]),
            "--api-key-file", svc["api_key_file"], "--json"]
    argv += (["--model", svc["model"]] if svc.get("model") else []) + \
        (["--profile", svc["profile"]] if svc.get("profile") else [])
    _json_out(host.run(argv, timeout=timeout_s), "installer start (incumbent)")
    now = _incumbent_service(host, python, installer, prefix)
    if now is None or (now["version"], now["port"]) != (svc["version"], svc["port"]):
        raise StepFailed(f"the incumbent {svc['version']} on port {svc['port']} did not come back as found: {now}")
    return {"version": now["version"], "port": now["port"], "same_config": now == svc}


def _put_text(host, path: str, text: str) -> None:
    """Write TEXT to PATH on the host, owner-only (an API key and a trusted key never sit world-readable)."""
    fd, tmp = tempfile.mkstemp(prefix="assay-acc-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        host.put(tmp, path)
        host.run(["chmod", "600", path], timeout=30).check()
    finally:
        os.unlink(tmp)
