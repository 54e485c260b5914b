"""Qualify one lane without Prefect: `python -m gates.qualify --lane NAME --candidate CANDIDATE.json
--wheel WHEEL [--config assay.toml | --spec LANE.json] --out DIR [--resume] [--key KEY.pem]
[--incumbent-wheel W --incumbent-identity F.json [--gates-size cpu|full] [--gates-settings F.json]]`.

The lane's window opens (the audit's first look, the lease, a snapshot), its kind's phases run
in order against the candidate's wheel served as a live engine, each phase leaving a signed
`phase` receipt in DIR/receipts; `restore` always runs last (engine stopped, host restored,
lease released, independent audit, hold time against the lane's cap), then the `lane` receipt
binds them all. Given an incumbent, the four judged gates then run in a window of their own
(gates/judged/lane.py) and leave their signed `verdict-*` receipts beside them. With --resume a crashed run continues at the first phase without a passed
receipt. Exit codes (releases/exit_codes.py): 0 pass, 1 fail or inconclusive, 2 usage, 3 bad
input, 4 host unavailable. The Prefect task calls `qualify()` itself."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gates.native import PHASES
from gates.phase_receipts import ReceiptWriter, Written, entry
from gates.phases import PhaseFailed, PhaseOutcome, verdict_of
from gates.places import default_lease_path, default_workdir
from gates.public import scrub, scrub_text
from gates.runtime import LaneRuntime
from gates.spec import LaneSpec, LaneSpecError, load_lane, load_lane_json
from gates.window import LaneWindow
from hosts import audit
from hosts.errors import HostError, HostLost, LeaseHeld
from releases import exit_codes
from releases.candidate import candidate_ref
from releases.canonical import file_sha256, load_json_bytes
from releases.errors import ReleaseError

Progress = Callable[[str], None]
FAULT_ENV = "ASSAY_LANE_FAULT"   # test hook: the named phase is made to fail after its body ran


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class QualifyResult:
    lane: str
    verdict: str                                   # "pass" | "fail" | "inconclusive"
    receipts: list[tuple[str, str, Path]]          # (kind, label, envelope path): phases in order, then the lane
    record: dict[str, Any]                         # the lane receipt's predicate
    phases: list[PhaseOutcome] = field(default_factory=list)


def _run_phase(name: str, body: Callable[[LaneRuntime], dict], rt: LaneRuntime, fault: str | None) -> PhaseOutcome:
    started, t0 = _now(), time.monotonic()
    try:
        facts, status = dict(body(rt) or {}), "pass"
    except PhaseFailed as failed:
        facts, status = dict(failed.facts), failed.status
    except HostLost:
        raise                      # the caller may retry the phase on a host that is back
    except Exception as error:    # a bug or an unexpected answer: recorded, never hidden, restore still runs
        facts, status = {"reason": f"{type(error).__name__}: {error}"}, "fail"
    if fault == name:
        facts.update({"injected_fault": True, "reason": facts.get("reason", "injected fault")})
        status = "fail"
    facts["seconds"] = round(time.monotonic() - t0, 3)
    return PhaseOutcome(name, status, started, _now(), scrub(facts, rt.roots()))


def _restore(rt: LaneRuntime, window: LaneWindow, fault: str | None) -> PhaseOutcome:
    started, t0 = _now(), time.monotonic()
    facts: dict[str, Any] = {}
    problems = []
    try:
        if fault == "restore":
            raise PhaseFailed("injected fault")
        stopped = rt.stop_engine()
        facts["engine_stop"] = stopped or {"running": False}
        if stopped and stopped.get("exit_code") != 0:
            problems.append("the engine did not stop gracefully")
    except Exception as error:
        facts["engine_stop"] = {"error": f"{type(error).__name__}: {error}"}
        problems.append("stopping the engine failed")
    closed = window.close()
    cap = rt.spec.setting("max_hold_s")
    try:
        checks = audit.compare(window.audit_before, window.observe())
    except HostLost:
        raise
    except Exception as error:     # an audit that cannot look is a failed audit, never a pass
        checks = [{"name": "observe", "status": "fail", "detail": f"the audit could not observe the host: {type(error).__name__}"}]
    facts.update({"restored": closed["restored"], "restore_diff": closed["restore_diff"],
                  "resumed_cleanup": window.resumed_cleanup, "held_s": closed["held_s"], "max_hold_s": cap,
                  "audit": {"ok": audit.passed(checks), "checks": checks}})
    if not closed["restored"]:
        problems.append("the host could not be proven back as found")
    if not audit.passed(checks):
        problems.append("the independent audit failed: " + ", ".join(c["name"] for c in checks if c["status"] != "pass"))
    if closed["held_s"] is not None and closed["held_s"] > cap:
        problems.append(f"the window held the host {closed['held_s']:.0f}s, over the lane's cap of {cap}s")
    if fault == "restore":
        facts["injected_fault"] = True
        problems.append("injected fault")
    if problems:
        facts["reason"] = "; ".join(problems)
    facts["seconds"] = round(time.monotonic() - t0, 3)
    return PhaseOutcome("restore", "fail" if problems else "pass", started, _now(), scrub(facts, rt.roots()))


def qualify(host, spec: LaneSpec, candidate: dict, wheel: Path, out_dir: Path, *, key: Ed25519PrivateKey,
            resume: bool = False, progress: Progress | None = None, workdir: str | None = None,
            base_python: str | None = None, lease_path: str | None = None, fault: str | None = None) -> QualifyResult:
    """Run lane `spec` for `candidate` (the candidate record) on `host` against `wheel`; write the
    signed receipts under `out_dir/receipts`; return what was written and the lane's verdict."""
    return qualify_ref(host, spec, candidate_ref(candidate), candidate["package"]["version"], wheel, out_dir, key=key,
                       resume=resume, progress=progress, workdir=workdir, base_python=base_python,
                       lease_path=lease_path, fault=fault)


def qualify_ref(host, spec: LaneSpec, ref: dict, version: str, wheel: Path, out_dir: Path, *, key: Ed25519PrivateKey,
                resume: bool = False, progress: Progress | None = None, workdir: str | None = None,
                base_python: str | None = None, lease_path: str | None = None, fault: str | None = None) -> QualifyResult:
    """qualify() for a caller that holds the candidate's reference and version, not its record."""
    say = progress or (lambda message: None)
    out_dir, wheel = Path(out_dir), Path(wheel)
    artifact = {"name": wheel.name, "sha256": file_sha256(wheel)}
    state_file = out_dir / "state" / f"window-{spec.name}.json"
    run_id = None
    if resume and state_file.exists():
        run_id = json.loads(state_file.read_text()).get("run_id")
    run_id = run_id or f"qualify-{spec.name}-{uuid.uuid4().hex[:12]}"[:64]
    writer = ReceiptWriter(out_dir, key, candidate=ref, lane=spec.name, kind=spec.kind, host=host.name,
                           artifact=artifact, run_id=run_id)
    if not resume:
        writer.clear()
    workdir = workdir or default_workdir(host, spec, out_dir)
    rt = LaneRuntime(host=host, spec=spec, version=version, wheel=wheel, wheel_sha256=artifact["sha256"],
                     workdir=workdir, base_python=base_python or spec.python or
                     (sys.executable if type(host).__name__ == "LocalHost" else "python3"), say=say)
    window = LaneWindow(host, lane=spec.name, run_id=run_id, lease_path=lease_path or default_lease_path(host, spec),
                        workdir=workdir, state_file=state_file, stale_after=spec.setting("lease_stale_s"),
                        resume=resume, progress=say)
    rt.window = window
    chain = spec.chain
    outcomes: list[PhaseOutcome] = []
    written: list[Written] = []
    window.open()
    try:
        resuming, stopped = resume, False
        for name in chain[:-1]:
            if stopped:
                outcomes.append(PhaseOutcome(name, "skipped", _now(), _now(), {"reason": "an earlier phase did not pass"}))
                continue
            previous = writer.passed(name) if resuming else None
            if previous is not None:
                say(f"phase {name}: passed earlier, kept")
                outcomes.append(previous[0])
                written.append(previous[1])
                continue
            resuming = False
            say(f"phase {name}: running")
            outcome = _run_phase(name, PHASES[name], rt, fault)
            written.append(writer.write_phase(outcome))
            outcomes.append(outcome)
            say(f"phase {name}: {outcome.status} ({outcome.facts['seconds']:.1f}s)"
                + (f" - {outcome.facts.get('reason')}" if outcome.status != "pass" else ""))
            stopped = outcome.status != "pass"
    finally:
        say("phase restore: running")
        restored = _restore(rt, window, fault)
        written.append(writer.write_phase(restored))
        outcomes.append(restored)
        say(f"phase restore: {restored.status} (held {restored.facts['held_s']}s)"
            + (f" - {restored.facts.get('reason')}" if restored.status != "pass" else ""))
    record = {
        "candidate": ref, "lane": spec.name, "kind": spec.kind, "host": host.name, "artifact": artifact,
        "verdict": verdict_of(outcomes),
        "phases": [o.as_record() for o in outcomes],
        "phase_receipts": [entry(w) for w in written],
        "window": {"lease": window.lease_record(), "restored": restored.facts["restored"],
                   "restore_diff": restored.facts["restore_diff"], "held_s": restored.facts["held_s"],
                   "max_hold_s": restored.facts["max_hold_s"], "audit": restored.facts["audit"]},
    }
    lane_written = writer.write_lane(record)
    say(f"lane {spec.name}: {record['verdict']}")
    return QualifyResult(spec.name, record["verdict"],
                         [(w.kind, w.label, w.path) for w in written] + [("lane", spec.name, lane_written.path)],
                         record, outcomes)


# -- command line -----------------------------------------------------------------------------

class BadInput(Exception):
    pass


def _load_candidate(path: str) -> dict:
    from releases.schema import validate
    try:
        record = load_json_bytes(Path(path).read_bytes(), where=path)
    except OSError as error:
        raise BadInput(f"{path}: cannot read the candidate record: {error.strerror}") from None
    validate("candidate", record, path)
    return record


def _host_for(spec: LaneSpec, config: str | None):
    """`local` is this machine unless the inventory names it; other labels come from the
    inventory that assay.toml's `inventory` key names (relative to the config file)."""
    inventory = None
    if config:
        import tomllib
        raw = tomllib.loads(Path(config).read_text(encoding="utf-8"))
        if raw.get("inventory"):
            inventory = Path(config).resolve().parent / raw["inventory"]
    if inventory is None:
        if spec.host != "local":
            raise BadInput(f"lane {spec.name!r} runs on host {spec.host!r}, which needs an inventory (`inventory` in assay.toml)")
        from hosts.local import LocalHost
        return LocalHost("local")
    from hosts.inventory import load_inventory
    inv = load_inventory(inventory)
    if spec.host == "local" and "local" not in inv.hosts:
        from hosts.local import LocalHost
        return LocalHost("local")
    return inv.connect(spec.host)


def _key(path: str | None, out_dir: Path) -> Ed25519PrivateKey:
    from releases.keys import ensure_local_key, load_private_key
    if path is None:
        path, _ = ensure_local_key(out_dir / "keys")
    return load_private_key(path)


def _table(result: QualifyResult) -> str:
    rows = [f"{'phase':<18} {'status':<13} {'seconds':>8}  key figures"]
    for o in result.phases:
        f = o.facts
        figures = {k: f[k] for k in ("exact", "depths", "prompt_tokens_min", "token_ids_equal", "restart_s",
                                     "decode_tok_s_median", "ttft_s_median", "held_s", "passed", "total")
                   if k in f}
        rows.append(f"{o.name:<18} {o.status:<13} {f.get('seconds', 0):>8.1f}  "
                    + (json.dumps(figures, sort_keys=True) if figures else f.get("reason", "")))
    return "\n".join(rows)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gates.qualify", description=__doc__.split("\n\n")[0])
    p.add_argument("--lane", required=True, help="the lane's name in assay.toml's [[lanes]]")
    p.add_argument("--candidate", required=True, help="the candidate record (candidate.json)")
    p.add_argument("--wheel", required=True, help="the engine wheel built from the candidate")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--config", help="assay.toml holding the lane (default: the built-in lanes)")
    source.add_argument("--spec", help="the lane as one JSON object (the keys of a [[lanes]] table)")
    p.add_argument("--out", required=True, help="where receipts/ and the run's private state go")
    p.add_argument("--resume", action="store_true", help="continue at the first phase without a passed receipt")
    p.add_argument("--key", help="Ed25519 private key (PEM) to sign with (default: OUT/keys, created once)")
    judged = p.add_argument_group("judged gates", "after the chain, the four judged gates in a window of their own")
    judged.add_argument("--incumbent-wheel", help="the incumbent's engine wheel: runs the judged gates against it")
    judged.add_argument("--incumbent-identity", help="JSON {version, wheel_sha256, source_commit, origin} of the incumbent")
    judged.add_argument("--gates-size", choices=("cpu", "full"),
                        help="corpus sizes (default: full on a cuda lane, cpu otherwise)")
    judged.add_argument("--gates-settings", help="JSON of the lane's gate tables, e.g. {\"abba\": {\"min_ratio\": 0.97}}")
    return p


def _judged_inputs(args, spec: LaneSpec) -> tuple[Path, dict, dict] | None:
    """(incumbent wheel, its identity, the lane's gate tables), or None when no incumbent is given."""
    if not args.incumbent_wheel:
        if args.incumbent_identity or args.gates_settings or args.gates_size:
            raise BadInput("--incumbent-identity, --gates-size and --gates-settings need --incumbent-wheel")
        return None
    wheel = Path(args.incumbent_wheel)
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise BadInput(f"{args.incumbent_wheel}: not a wheel file")
    if not args.incumbent_identity:
        raise BadInput("--incumbent-wheel needs --incumbent-identity (the incumbent's version, wheel digest and source)")
    try:
        identity = load_json_bytes(Path(args.incumbent_identity).read_bytes(), where=args.incumbent_identity)
        tables = (load_json_bytes(Path(args.gates_settings).read_bytes(), where=args.gates_settings)
                  if args.gates_settings else {})
    except OSError as error:
        raise BadInput(f"{error.filename}: {error.strerror}") from None
    if not isinstance(identity, dict) or not isinstance(tables, dict):
        raise BadInput("the incumbent identity and the gate settings must be JSON objects")
    missing = [k for k in ("version", "wheel_sha256", "source_commit", "origin") if k not in identity]
    if missing:
        raise BadInput(f"{args.incumbent_identity}: missing {', '.join(missing)}")
    if identity["wheel_sha256"] != file_sha256(wheel):
        raise BadInput(f"{args.incumbent_wheel}: its sha256 is not the identity's wheel_sha256")
    size = args.gates_size or ("full" if spec.lane_kind.device == "cuda" else "cpu")
    return wheel, identity, {**tables, "size": size}


def _judge(host, spec: LaneSpec, candidate: dict, wheel: Path, out_dir: Path, key, judged, say) -> str:
    """The judged gates in their own window; 'pass' unless a verdict blocks."""
    from gates.judged import lane as judged_lane   # the judged gates load their corpora only when asked for
    incumbent_wheel, identity, tables = judged
    result = judged_lane.judge_lane(host, spec, candidate_ref(candidate), candidate["package"]["version"], wheel,
                                    incumbent_wheel, identity, out_dir, key=key, lane_gates=tables, progress=say)
    for kind, verdict in result.verdicts.items():
        say(f"{kind}: {verdict['verdict']}" + (f" - {'; '.join(verdict['reasons'])}" if verdict["verdict"] != "pass" else ""))
    for kind, label, path in result.receipts:
        print(f"{kind:<22} {label:<32} {path}")
    return "fail" if result.blocking or not result.window["audit"]["ok"] else "pass"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    err = lambda message: print(f"qualify: error: {message}", file=sys.stderr)   # noqa: E731
    try:
        spec = load_lane_json(args.spec) if args.spec else load_lane(args.lane, args.config)
        if spec.name != args.lane:
            raise BadInput(f"{args.spec}: the lane is named {spec.name!r}, not {args.lane!r}")
        candidate = _load_candidate(args.candidate)
        wheel = Path(args.wheel)
        if not wheel.is_file() or wheel.suffix != ".whl":
            raise BadInput(f"{args.wheel}: not a wheel file")
        out_dir = Path(args.out)
        key = _key(args.key, out_dir)
        judged = _judged_inputs(args, spec)
        host = _host_for(spec, args.config)
    except (LaneSpecError, BadInput, ReleaseError, ValueError) as error:
        err(str(error))
        return exit_codes.BAD_INPUT
    except HostError as error:
        err(str(error))
        return exit_codes.BAD_INPUT if type(error).__name__ == "InventoryError" else exit_codes.UNAVAILABLE
    say = lambda line: print(f"[{time.strftime('%H:%M:%S')}] {args.lane}: {line}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        result = qualify(host, spec, candidate, wheel, out_dir, key=key, resume=args.resume, progress=say,
                         fault=os.environ.get(FAULT_ENV) or None)
        print(_table(result))
        for kind, label, path in result.receipts:
            print(f"{kind:<6} {label:<32} {path}")
        judged_verdict = "pass"
        if judged and result.verdict != "pass":
            # The judged gates start the engine on this host too; a chain that did not pass (a
            # host lacking the lane's packages, a candidate that failed a phase) has already
            # decided the lane, and its window was restored.
            say(f"judged gates: not run, the native chain ended {result.verdict}")
        elif judged:
            judged_verdict = _judge(host, spec, candidate, wheel, out_dir, key, judged, say)
    except LeaseHeld as error:
        err(str(error))
        return exit_codes.UNAVAILABLE
    except HostError as error:
        err(scrub_text(str(error)))
        return exit_codes.UNAVAILABLE
    except ReleaseError as error:    # a record that could not be written (e.g. it would publish a host path)
        err(str(error))
        return exit_codes.FAILED
    except PhaseFailed as error:     # the judged gates' window could not measure (its engine did not start)
        err(f"judged gates: {scrub_text(str(error))}")
        return exit_codes.FAILED
    finally:
        host.close()
    return exit_codes.OK if result.verdict == "pass" and judged_verdict == "pass" else exit_codes.FAILED


if __name__ == "__main__":
    sys.exit(main())
