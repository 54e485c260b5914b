"""Fault points for rehearsals and tests: ASSAY_INSTALL_FAULT="kill:<point>" kills the installer
with SIGKILL at that point (a real interruption: no handler, no cleanup runs), "fail:<point>" makes
the step fail as a broken install would. Points: "venv" (release directory half made),
"activation" (after the `current` swap, before previous_release is written)."""
from __future__ import annotations

import os
import signal

from releases.install.errors import InstallError

ENV = "ASSAY_INSTALL_FAULT"
POINTS = ("venv", "activation")


def at(point: str) -> None:
    fault = os.environ.get(ENV, "")
    action, _, where = fault.partition(":")
    if where != point:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "fail":
        raise InstallError(f"fault injected by {ENV}={fault}", where=point)
