"""Build twice, compare, bisect every difference to its cause, keep diffoscope evidence.

The same path runs under the release flow (flows.steps.compare_builds) and without Prefect
(`assay reproduce`). The reproducibility record gains three parts (releases/schemas):
`variations` (a's and b's value of each, and why any did not vary), `bisection` (one cause per
difference, the trials run) and `evidence` (the diffoscope reports, by name and sha256).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from builders import bisect, recipe, variations
from builders.compare import compare
from builders.diffoscope_report import report
from hosts.base import Host
from hosts.local import LocalHost
from releases.schema import validate


@dataclass
class Reproduction:
    builds: tuple[recipe.BuildResult, recipe.BuildResult]
    record: dict

    def summary(self) -> dict:
        """What `assay reproduce --json` prints, with where each build ran (its receipt's placement)."""
        return {**result_json(self.record), "hosts": {b.label: _placement_of(b) for b in self.builds}}


@dataclass
class Rebuild:
    """Everything a bisection trial needs to build the candidate again (on a's host, or on b's for
    the hostname trial when b is another machine)."""
    host_a: Host
    host_b: Host
    candidate: dict
    source_dir: Path
    workroot: str
    local_dir: Path
    python_a: str | None = None
    python_b: str | None = None
    timeout: float = recipe.BUILD_TIMEOUT_S
    progress: recipe.Progress | None = None
    kernel_archs: tuple[int, ...] | None = None

    def trial(self, name: str, plan: dict[str, str]) -> Path:
        other_machine = not (isinstance(self.host_a, LocalHost) and isinstance(self.host_b, LocalHost))
        on_b = name == "hostname" and other_machine and self.host_a.name != self.host_b.name
        host, python = (self.host_b, self.python_b) if on_b else (self.host_a, self.python_a)
        workdir = recipe.build_dir(self.workroot, plan["build_path"])
        if host.exists(workdir):  # the side's own path: a's and b's artifacts are already fetched
            host.remove(workdir)
        out = self.local_dir / "trials" / name
        if out.exists():
            shutil.rmtree(out)
        built = recipe.build(host, self.candidate, self.source_dir, f"trial-{name}", workdir, python=python,
                             workroot=self.workroot, local_dir=out, timeout=self.timeout, progress=self.progress,
                             plan=plan, kernel_archs=self.kernel_archs)
        return built.artifacts[0].parent


def reproduce(host_a: Host, host_b: Host, candidate: dict, source_dir: str | Path, workroot: str, *,
              local_dir: str | Path, enabled: tuple[str, ...] = variations.NAMES, waivers: Iterable[dict] = (),
              python_a: str | None = None, python_b: str | None = None, timeout: float = recipe.BUILD_TIMEOUT_S,
              progress: recipe.Progress | None = None, say: Callable[[str], None] | None = None,
              source_uri: str | None = None,
              placements: tuple[dict | None, dict | None] = (None, None),
              kernel_archs: tuple[int, ...] | None = None) -> Reproduction:
    """Build a and b (b with the ENABLED variations), compare, and explain every difference."""
    local = Path(local_dir)
    builds = recipe.build_twice(host_a, host_b, candidate, source_dir, workroot, local_dir=local / "artifacts",
                                python_a=python_a, python_b=python_b, timeout=timeout, progress=progress,
                                source_uri=source_uri, enabled=enabled, placements=placements,
                                kernel_archs=kernel_archs)
    record = compare(builds[0].artifacts[0].parent, builds[1].artifacts[0].parent, candidate, waivers=waivers)
    rebuild = Rebuild(host_a, host_b, candidate, Path(source_dir), workroot, local, python_a, python_b, timeout,
                      progress, kernel_archs)
    record = explain(record, builds, rebuild, enabled, local / "evidence", say=say)
    return Reproduction(builds, record)


def explain(record: dict, builds, rebuild: Rebuild, enabled: tuple[str, ...], evidence_dir: Path,
            say: Callable[[str], None] | None = None) -> dict:
    """RECORD with its variations, and for a difference the bisection and diffoscope evidence (validated)."""
    a, b = builds
    summary = variations.summary(_variations_of(a), _variations_of(b), enabled)
    record = {**record, "variations": summary}
    if record["difference_count"]:
        varied = [n for n, v in summary.items() if v["varied"]]
        record["bisection"] = bisect.bisect(record, a.artifacts[0].parent, rebuild.trial, varied, progress=say)
        record["evidence"] = [report(a.artifacts[0].parent / f["name"], b.artifacts[0].parent / f["name"], evidence_dir)
                              for f in record["files"] if not f["identical"] and f["a_sha256"] and f["b_sha256"]]
    validate("reproducibility", record, "reproducibility")
    return record


def result_json(record: dict) -> dict:
    """{"identical", "differences": [{artifact, member, kind, cause}], "variations", ...}."""
    bis = record.get("bisection", {"differences": [], "trials": []})
    return {"identical": record["difference_count"] == 0, "verdict": record["verdict"],
            "differences": bis["differences"], "trials": bis["trials"], "variations": record["variations"],
            "evidence": record.get("evidence", [])}


def _placement_of(build: recipe.BuildResult) -> dict:
    varied = build.record["buildDefinition"]["internalParameters"]["varied"]
    return varied.get("placement") or {"kind": "given", "host": varied["host"]}


def _variations_of(build: recipe.BuildResult) -> dict:
    return build.record["buildDefinition"]["internalParameters"]["varied"]["variations"]
