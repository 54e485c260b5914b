"""GPU power limits. Dry-run by default: a set only logs the command it would run, unless the
PowerControl was built with dry_run=False AND the environment allows it explicitly."""
from __future__ import annotations

import logging
import os

from hosts.errors import PowerControlRefused

ALLOW_ENV = "ASSAY_ALLOW_POWER_LIMIT"
log = logging.getLogger(__name__)


class PowerControl:
    def __init__(self, host, *, dry_run: bool = True) -> None:
        self.host, self.dry_run = host, dry_run
        self.would_run: list[str] = []

    def read_limits(self) -> dict[int, float | None]:
        """GPU index -> power limit in watts; {} on a host without nvidia-smi."""
        r = self.host.run("command -v nvidia-smi >/dev/null 2>&1 || exit 127; nvidia-smi "
                          "--query-gpu=index,power.limit --format=csv,noheader,nounits", timeout=60)
        if r.exit_code == 127:
            return {}
        r.check()
        out: dict[int, float | None] = {}
        for line in r.stdout.splitlines():
            index, _, value = line.partition(",")
            try:
                out[int(index)] = float(value)
            except ValueError:
                out[int(index)] = None  # "[N/A]": the GPU does not report a limit
        return out

    def set_limit(self, gpu_index: int, watts: float) -> str:
        """Set one GPU's limit; returns the command. Dry run: only logs and remembers it."""
        argv = ["nvidia-smi", "-i", str(int(gpu_index)), "-pl", f"{watts:g}"]
        text = " ".join(argv)
        if self.dry_run:
            log.warning("dry run: on host %s would run: %s", self.host.name, text)
            self.would_run.append(text)
            return text
        if os.environ.get(ALLOW_ENV) != "1":
            raise PowerControlRefused(f"refusing to run {text!r} on host {self.host.name!r}: "
                                      f"PowerControl(dry_run=False) also needs {ALLOW_ENV}=1")
        self.host.run(argv, timeout=60).check()
        return text
