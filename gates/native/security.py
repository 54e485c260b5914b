"""security: the engine's state root is private (checkpoint folders and files, the request log:
no group or world bits), an API-key file with loose permissions is refused at startup, and the
API key appears in no log or state file."""

from __future__ import annotations

import shlex

from gates.phases import PhaseFailed
from gates.runtime import EngineProcess


def run(rt) -> dict:
    args = rt.http()
    r = rt.probe("request", {**args, "method": "POST", "path": "/v1/chat/completions",
                             "body": {"model": rt.model_name, "messages": [{"role": "user", "content": "Hi"}],
                                      "max_tokens": 2, "temperature": 0, "prompt_cache_key": "security"}})
    rt.probe("request", {**args, "method": "POST", "path": "/v1/engine/checkpoints", "body": {"session": "security"}})
    perms = rt.probe("perms", {"roots": [rt.state_root, rt.path("secrets")]})

    loose = rt.path("loose-key", "api-key")
    rt.host.mkdir(rt.path("loose-key"))
    rt.host.run(f"cat > {shlex.quote(loose)} && chmod 644 {shlex.quote(loose)}", stdin=rt.api_key() + "\n",
                timeout=60).check()
    started = rt.launch("loose-key", rt.profile(checkpoints={"directory": None}, request_log=None), key_file=loose,
                        timeout=300)
    if isinstance(started, EngineProcess):
        rt.kill(started)
        loose_exit = None
    else:
        loose_exit = started
    rt.host.remove(rt.path("loose-key"))
    leaks = rt.probe("contains", {"secret": rt.api_key(), "roots": [rt.state_root, rt.path("run")]})
    facts = {"chat_status": r["status"], "state_entries": perms["entries"], "state_open_to_others": len(perms["open"]),
             "open_modes": sorted({e["mode"] for e in perms["open"]}), "loose_key_file_exit_code": loose_exit,
             "loose_key_file_refused": loose_exit == 2, "files_scanned_for_key": leaks["files_scanned"],
             "files_with_key": leaks["files_with_secret"]}
    problems = []
    if perms["open"]:
        problems.append(f"{len(perms['open'])} state-root entries are open to group or others")
    if loose_exit != 2:
        problems.append("an API-key file readable by others was accepted (it must be refused with exit 2)")
    if leaks["files_with_secret"]:
        problems.append(f"the API key appears in {leaks['files_with_secret']} log or state file(s)")
    if problems:
        raise PhaseFailed("; ".join(problems), facts)
    return facts
