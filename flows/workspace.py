"""Where one run keeps its files: builds, lane work and the staged release directory."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from flows.build_hosts import ON_THIS_MACHINE
from flows.config import Config


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def for_run(cls, cfg: Config, run_id: str) -> "Workspace":
        root = cfg.work_dir / f"run-{run_id}"
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    @property
    def release(self) -> Path:
        return self.root / "release"

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def builds(self) -> Path:
        return self.root / "builds"

    def build_root(self, hosts: list[str]) -> str:
        """Where both builds happen: under the workspace when every build host is this machine or
        a build-host container started for the run (fresh: the path is free there too), else a
        per-run folder in the remote hosts' /tmp (the same path on each)."""
        if all(h in ON_THIS_MACHINE for h in hosts):
            return str(self.builds)
        return f"/tmp/assay-builds/{self.root.name}"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    def clear_build(self) -> None:
        """Remove what a build that stopped part-way left here (its worker died): the exported
        source, the build directories and the fetched artifacts, so that the retried build starts
        fresh, as every build must. Remote build hosts keep their per-run folder in /tmp."""
        for path in (self.source, self.builds, self.artifacts):
            shutil.rmtree(path, ignore_errors=True)

    def lane(self, name: str) -> Path:
        return self.root / "lanes" / name

    def lane_interrupted(self, name: str) -> bool:
        """A window of this lane opened here and never closed: the process running it died (its
        worker was killed). The retried lane resumes it (gates/window.py): it waits out the dead
        holder's lease, restores the host as the first window found it, keeps the phases that
        passed. The state file is gates/qualify.py's: <lane dir>/state/window-<lane>.json."""
        return (self.lane(name) / "state" / f"window-{name}.json").is_file()

    @property
    def summary(self) -> Path:
        """What make run and the tests read back: the published version and where it went."""
        return self.root / "result.json"

    def write_summary(self, version: str, location: str) -> None:
        self.summary.write_text(json.dumps({"version": version, "location": location}))
