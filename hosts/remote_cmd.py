"""Shell text shared by SSHHost and DockerHost: the setsid wrapper that reports the process
group to kill, the group killer, and small file commands."""
from __future__ import annotations

import shlex
from typing import Mapping, Sequence

# The remote command runs in a new session (setsid -w waits and passes the exit code on);
# its first stderr line names the group, so a timeout or cancellation can kill all of it.
# `kill -SIG -PGID` (no `--`): the one spelling dash's and bash's builtins both accept.
KILL_GROUP_SH = ("kill -TERM -{pgid} 2>/dev/null || exit 0; i=0; "
                 "while [ $i -lt {ticks} ] && kill -0 -{pgid} 2>/dev/null; do sleep 0.1; i=$((i+1)); done; "
                 "kill -KILL -{pgid} 2>/dev/null; exit 0")


def wrap_command(cmd: Sequence[str] | str, env: Mapping[str, str] | None, cwd: str | None,
                 replace_env: bool) -> str:
    # An argv runs as is (no shell between); a string runs under sh -c.
    target = f"sh -c {shlex.quote(cmd)}" if isinstance(cmd, str) else shlex.join(str(a) for a in cmd)
    words = ["exec env", "-i" if replace_env else "", *(shlex.quote(f"{k}={v}") for k, v in (env or {}).items()), target]
    env_cmd = " ".join(w for w in words if w)
    cd = f"cd {shlex.quote(cwd)} || exit 125; " if cwd else ""
    script = f'echo "@@ASSAY-PGID $$" >&2; {cd}{env_cmd}'
    return f"exec setsid -w sh -c {shlex.quote(script)}"


def kill_group_command(pgid: int, grace_s: float = 2.0) -> str:
    return KILL_GROUP_SH.format(pgid=int(pgid), ticks=max(1, int(grace_s * 10)))
