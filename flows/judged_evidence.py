"""Evidence reuse for the judged gates: a lane's measurements are kept, keyed by what was measured,
so that a rerun of the same bytes judges the same values (and a waiver naming a measured value
can apply to it) instead of measuring new noise.

Prefect's own task caching holds them: `measure_judged_gates` is a task whose cache key
(`evidence_key`) is the sha256 of the candidate wheel's sha256, the incumbent wheel's sha256, the
lane (its table without the gate thresholds: host, kind, model, engine settings), the measuring
settings of the gates (sizes, cases, tokens, repeats; not thresholds), the corpora's sha256 and
the measuring code's sha256; its result (plain JSON: digests, rates, scores, times, never
prompts or outputs) persists under `<state>/judged-evidence/<key>`. A Prefect result fits: the
data is one JSON document per key, Prefect writes it with its cache metadata and looks it up by
key in any later run, and a failed measurement (a window that did not restore the host) is
never cached because the task fails. Delete the file (or run with PREFECT_TASKS_REFRESH_CACHE=
true) to measure again.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.runtime import flow_run
from prefect.transactions import CommitMode, transaction

from builders.incumbent import Incumbent
from flows.config import Config, Lane
from flows.errors import LaneFailed
from flows.gpu_slot import gpu_slot
from flows.hostmap import host_for
from flows.workspace import Workspace
from gates.judged import lane as judged_lane
from gates.judged.corpus import ABBA, QUALITY, corpus_sha256
from gates.judged.identity import code_digest
from gates.judged.run import EVIDENCE_SCHEMA
from gates.judged.settings import measuring, resolve
from releases.canonical import digest, file_sha256


def judged_evidence_dir(cfg: Config) -> Path:
    # Not <state>/evidence/: that holds lane evidence imported from GPU hosts (flows/lane_evidence.py).
    return cfg.state_dir / "judged-evidence"


def evidence_key(cfg: Config, lane: Lane, wheel: Path, incumbent: Incumbent) -> str:
    """The sha256 naming a lane's judged-gate measurements: equal exactly when the same bytes would
    be measured the same way on the same lane."""
    table = next(t for t in cfg.raw["lanes"] if t["name"] == lane.name)
    gates = lane.gates or {}
    return digest({
        "schema": EVIDENCE_SCHEMA,
        "candidate_wheel_sha256": file_sha256(wheel),
        "incumbent_wheel_sha256": incumbent.identity["wheel_sha256"],
        "lane": {**{k: v for k, v in table.items() if k != "gates"}, "model": lane.model},
        "settings": measuring(resolve(gates.get("size", "cpu"), gates)),
        "corpora": {ABBA.name: corpus_sha256(ABBA), QUALITY.name: corpus_sha256(QUALITY)},
        "code_sha256": code_digest(),
    })


@task(name="measure judged gates", cache_key_fn=lambda context, parameters: parameters["key"],
      persist_result=True, result_serializer="json")
def measure_judged_gates(cfg: Config, ws: Workspace, lane: Lane, version: str, wheel: Path, incumbent: Incumbent,
                         key: str) -> dict:
    """Serve the candidate and the incumbent side by side in one window of the lane's host and
    measure the four judged gates; cached by `key` (evidence_key)."""
    log = get_run_logger()
    say = lambda line: log.info("lane %s: %s", lane.name, line)  # noqa: E731
    with gpu_slot(lane.gpu, lane.host):
        evidence = judged_lane.measure_lane(
            host_for(cfg, lane.host), cfg.lane_spec(lane.name), version, wheel, incumbent.wheel,
            incumbent.identity, ws.lane(lane.name) / "judged", lane_gates=lane.gates, progress=say)
    window = evidence["window"]
    if not window["restored"] or not window["audit"]["ok"]:
        raise LaneFailed(f"lane {lane.name}: the judged-gates window did not restore the host as found: "
                         f"{window['restore_diff']}")
    return {**evidence, "evidence_sha256": key, "measured_in_run": str(flow_run.get_id() or "local")}


def measure(cfg: Config, ws: Workspace, lane: Lane, version: str, wheel: Path,
            incumbent: Incumbent) -> tuple[dict, bool]:
    """The lane's judged-gate evidence, measured now or reused; (evidence, reused)."""
    key = evidence_key(cfg, lane, wheel, incumbent)
    # A path is Prefect's local result storage (a LocalFileSystem over it) and needs no saved block.
    task = measure_judged_gates.with_options(result_storage=judged_evidence_dir(cfg))
    # The judging task that calls this fails when a gate blocks, and Prefect would roll a nested
    # task's result back with it; the measurements are evidence whatever the verdict, so their
    # transaction commits eagerly (a failed measuring task still writes nothing).
    with transaction(commit_mode=CommitMode.EAGER):
        evidence = task(cfg, ws, lane, version, wheel, incumbent, key)
    return evidence, evidence["measured_in_run"] != str(flow_run.get_id() or "local")
