"""The release-candidate flow end to end against a real Prefect server: real builds of the engine,
the cpu-smoke lane on the tiny model, the approval gate driven through `assay approve`."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from flows.runs import recent_runs, wait_for_state

pytestmark = pytest.mark.slow
ASSAY = str(Path(sys.executable).with_name("assay"))
MODEL = Path(__file__).resolve().parents[2] / ".assay" / "models" / "smollm2-135m-instruct"


def write_config(tmp: Path, repo: Path, timeout_s: int = 1800) -> Path:
    cfg = tmp / "assay.toml"
    cfg.write_text(f"""
[release]
name = "e2e"
source = "{repo}"
subdir = "engine"
approvers = ["local-operator", "release-lead"]
approval_timeout_s = {timeout_s}
approval_poll_s = 1
allow_unsigned_approval = true

[paths]
state = "{tmp / 'state'}"

[store]
kind = "filesystem"
path = "{tmp / 'store'}"

[build]
hosts = ["local", "local"]
timeout_s = 900

[[lanes]]
name = "cpu-smoke"
kind = "cpu-smoke"
host = "local"
# The acceptance window serves the installed release with the reference model (the lane's phases use the tiny one).
model = "{MODEL}"
acceptance = true
""")
    return cfg


class FlowProcess:
    """The flow run in a process of its own, as a worker would run it."""

    def __init__(self, env: dict, config: Path, name: str, log: Path):
        code = ("from flows.release_candidate import release_candidate as f\n"
                f"f.with_options(flow_run_name={name!r})(config={str(config)!r})\n")
        self.log = log
        self.proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env},
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.name = name

    def run_id(self, timeout_s: float = 120) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for run in recent_runs(limit=50):
                if run["name"] == self.name:
                    return run["id"]
            assert self.proc.poll() is None, f"flow process exited early:\n{self.log.read_text()[-4000:]}"
            time.sleep(1)
        raise AssertionError(f"no flow run named {self.name}")

    def wait(self, timeout_s: float = 300) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _approve(env: dict, run_id: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([ASSAY, "approve", run_id, *extra], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def _paused_run(prefect_api, engine_repo, tmp_path, name, timeout_s=1800):
    config = write_config(tmp_path, engine_repo, timeout_s)
    flow = FlowProcess(prefect_api, config, name, tmp_path / "flow.log")
    run_id = flow.run_id()
    state = wait_for_state(run_id, {"PAUSED"}, timeout_s=1500, poll_s=2)
    assert state == "PAUSED", f"run ended {state} before the gate:\n{flow.log.read_text()[-6000:]}"
    return flow, run_id


def _published_versions(tmp_path: Path) -> list[Path]:
    """The version folders of the store (its .incoming/ upload area and the acceptance window's
    staging/ folder are no versions)."""
    from releases.staging import STAGING_PREFIX

    store = tmp_path / "store"
    return sorted(p for p in store.iterdir() if not p.name.startswith(".") and p.name != STAGING_PREFIX) \
        if store.exists() else []


@pytest.fixture(scope="module")
def published(prefect_api, engine_repo, tmp_path_factory):
    """One candidate taken through the whole flow and approved; later tests read its store."""
    tmp = tmp_path_factory.mktemp("published")
    flow, run_id = _paused_run(prefect_api, engine_repo, tmp, f"e2e-approve-{os.getpid()}")
    refused = _approve(prefect_api, run_id, "--as", "intruder", "--reason", "not on the list")
    ok = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "tests: approve")
    code = flow.wait()
    return {"tmp": tmp, "run_id": run_id, "refused": refused, "ok": ok, "code": code, "log": flow.log}


def test_approved_candidate_is_published_and_verifies(prefect_api, engine_repo, published):
    tmp_path = published["tmp"]
    refused = published["refused"]
    assert refused.returncode != 0 and "intruder" in (refused.stdout + refused.stderr)
    assert published["ok"].returncode == 0, published["ok"].stderr
    assert published["code"] == 0, published["log"].read_text()[-6000:]
    assert wait_for_state(published["run_id"], set(), timeout_s=60) == "COMPLETED"
    (release,) = _published_versions(tmp_path)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["state"] == "published"
    assert manifest["approval"]["approver"] == "local-operator"
    assert {r["kind"] for r in manifest["receipts"]} >= {"candidate", "build", "reproducibility", "lane"}
    assert release.name == manifest["version"]
    _assert_accepted(release, manifest)
    key = tmp_path / "state" / "keys" / "release.pub.pem"
    verify = subprocess.run([ASSAY, "verify", "--require-ready", "--json", "--key", str(key), str(release)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["ok"] is True
    # A second run of the same candidate is refused before it builds anything.
    again = FlowProcess(prefect_api, write_config(tmp_path, engine_repo), f"e2e-again-{os.getpid()}", tmp_path / "again.log")
    assert again.wait(600) != 0
    assert "already published" in again.log.read_text()


def _assert_accepted(release: Path, manifest: dict) -> None:
    """The published manifest requires the cpu-smoke acceptance window, and its receipt shows it passed."""
    assert manifest["acceptance"] == {"lanes": ["cpu-smoke"], "incumbent": None}
    (entry,) = [r for r in manifest["receipts"] if r["kind"] == "acceptance"]
    assert entry["label"] == "cpu-smoke"
    envelope = json.loads((release / entry["path"]).read_text())
    pred = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert pred["verdict"] == "pass" and pred["lane"] == "cpu-smoke" and pred["attempt"] == 1
    from releases.sums import parse_sums
    sums = parse_sums((release / "SHA256SUMS").read_bytes())
    assert {d["name"] for d in pred["downloads"]} == {"SHA256SUMS", *sums}
    assert all(d["matched"] and d["anonymous"] for d in pred["downloads"])
    assert all(sums[d["name"]] == d["sha256"] for d in pred["downloads"] if d["name"] != "SHA256SUMS")
    assert pred["auth"] == {"authenticated_status": 200, "anonymous_status": 401}
    assert [b["passed"] for b in pred["behaviour"]] == [True, True, True]
    blocks = pred["docs"]["blocks"]
    assert pred["docs"]["asset"] == "QUICKSTART.md" and len(blocks) >= 3
    assert all(b["exit_status"] == 0 and re.fullmatch(r"[0-9a-f]{64}", b["sha256"]) for b in blocks)
    assert pred["docs"]["sha256"] == sums["artifacts/QUICKSTART.md"]
    assert pred["restore"]["restored"] is True and pred["restore"]["audit_passed"] is True
    assert all(c["status"] == "pass" for c in pred["restore"]["checks"])
    assert 0 < pred["hold_s"] <= pred["max_hold_s"] and pred["window"]["held_s"] == pred["hold_s"]


@contextmanager
def prefect_artifact(key: str):
    """The latest markdown of the Prefect artifact `key`, read back from the server."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        artifact = client.read_latest_artifacts(limit=200)
    found = [a for a in artifact if a.key == key]
    assert found, f"no artifact {key!r} on the server"
    yield found[0].data


def _nightly(env: dict, config: Path, log: Path) -> int:
    code = ("from flows.nightly import nightly_reproducibility as f\n"
            f"print('REPORT', __import__('json').dumps(f(config={str(config)!r})))\n")
    with open(log, "wb") as out:
        return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, stdout=out,
                              stderr=subprocess.STDOUT, timeout=900).returncode


def test_nightly_rebuild_matches_the_published_sums(prefect_api, published):
    tmp = published["tmp"]
    assert published["code"] == 0
    log = tmp / "nightly.log"
    assert _nightly(prefect_api, tmp / "assay.toml", log) == 0, log.read_text()[-4000:]
    report = json.loads(log.read_text().split("REPORT ", 1)[1].splitlines()[0])
    assert report["drift"] is False
    assert {f["status"] for f in report["files"]} == {"matches"}
    # The wheel, the sdist and the kernels: not the installer or quickstart, which the pipeline writes.
    names = sorted(f["name"] for f in report["files"])
    assert len(names) == 3 and [n.endswith(s) for n, s in zip(names, ("-kernels.tar", ".whl", ".tar.gz"))] == [True] * 3, names


def test_nightly_drift_fails_the_run_and_names_the_member(prefect_api, published, tmp_path):
    """The published wheel differs from what its candidate now builds to (one member's bytes, as a
    changed toolchain would do): the nightly run fails and its report names the member."""
    assert published["code"] == 0
    (release,) = _published_versions(published["tmp"])
    store = tmp_path / "store"
    shutil.copytree(release, store / release.name)
    wheel = next((store / release.name / "artifacts").glob("*.whl"))
    wheel.chmod(0o644)
    members = {}
    with zipfile.ZipFile(wheel) as zin:
        infos = zin.infolist()
        members = {i.filename: zin.read(i) for i in infos}
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in infos:
            data = members[info.filename]
            if info.filename == "engine/__init__.py":
                data += b"# drifted\n"
            zout.writestr(info, data)
    sums = store / release.name / "SHA256SUMS"
    sums.chmod(0o644)
    new_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    sums.write_text("".join(f"{new_sha}{line[64:]}\n" if line.endswith(".whl") else line + "\n"
                            for line in sums.read_text().splitlines()))
    config = tmp_path / "assay.toml"
    config.write_text((published["tmp"] / "assay.toml").read_text().replace(str(published["tmp"] / "store"), str(store)))
    log = tmp_path / "nightly.log"
    assert _nightly(prefect_api, config, log) != 0
    text = log.read_text()
    assert "no longer gives its published bytes" in text
    with prefect_artifact("nightly-reproducibility") as markdown:
        assert "DRIFT" in markdown and "engine/__init__.py" in markdown and "content" in markdown


def test_rejection_fails_the_run_and_publishes_nothing(prefect_api, engine_repo_no_kernels, tmp_path):
    flow, run_id = _paused_run(prefect_api, engine_repo_no_kernels, tmp_path, f"e2e-reject-{os.getpid()}")
    sent = _approve(prefect_api, run_id, "--as", "release-lead", "--reason", "tests: reject", "--reject")
    assert sent.returncode == 0, sent.stderr
    assert flow.wait() != 0
    assert wait_for_state(run_id, set(), timeout_s=60) == "FAILED"
    assert _published_versions(tmp_path) == []
    assert "rejected" in flow.log.read_text()


def test_approval_timeout_fails_the_run_and_publishes_nothing(prefect_api, engine_repo_no_kernels, tmp_path):
    config = write_config(tmp_path, engine_repo_no_kernels, timeout_s=3)
    flow = FlowProcess(prefect_api, config, f"e2e-timeout-{os.getpid()}", tmp_path / "flow.log")
    run_id = flow.run_id()
    assert flow.wait(1500) != 0
    assert "Pausing flow" in flow.log.read_text(), flow.log.read_text()[-6000:]
    assert "no approval" in flow.log.read_text()
    assert wait_for_state(run_id, set(), timeout_s=60) == "FAILED"
    assert _published_versions(tmp_path) == []
    late = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "too late")
    assert late.returncode != 0 and "not PAUSED" in (late.stdout + late.stderr)


def test_published_notes_link_every_figure_to_its_record(published):
    """The notes bound into the published release: every Markdown link resolves to the value
    printed, and no number stands outside a link (docs/INTERFACES.md, Release notes)."""
    from tests.releases.test_notes import MD_LINK, md_links, printed, resolve_link

    (release,) = _published_versions(published["tmp"])
    manifest = json.loads((release / "manifest.json").read_text())
    assert sorted(n["format"] for n in manifest["notes"]) == ["html", "md"]
    text = (release / "notes" / "RELEASE-NOTES.md").read_text()
    links = md_links(text)
    assert len(links) > 40
    for shown, href in links:
        assert shown == printed(resolve_link(release, href)), href
    kinds = {href.split("/")[1] for _, href in links if href.startswith("receipts/")}
    assert {"phase", "lane", "build"} <= kinds
    rest = re.sub(r"``.*?``|`[^`]*`", "", MD_LINK.sub("", text))
    assert not re.findall(r".{0,30}\d.{0,30}", rest)


@pytest.fixture(scope="module")
def gate_failed(prefect_api, engine_repo_no_kernels, tmp_path_factory):
    """The cpu-smoke lane with the judged gates on (the tiny model, the incumbent built from the
    same engine commit) and an impossible min_ratio: the ABBA gate fails whatever the timing noise."""
    tmp = tmp_path_factory.mktemp("gate")
    config = write_config(tmp, engine_repo_no_kernels)
    # The tiny model's byte-level prompts: a context of 2,048 tokens holds the quality and determinism
    # prompts, and the fresh 48-token ABBA case is the one the tiny model decodes text for. Its
    # timing on shared cores is noise, so the floor and the spread bound are set out of reach: the
    # one finding is the weighted ratio below the impossible min_ratio.
    config.write_text(config.read_text() + "\n[lanes.qualify]\nmax_context = 2048\n"
                      "\n[lanes.gates]\nsize = \"cpu\"\n\n[lanes.gates.abba]\nmin_ratio = 1000.0\n"
                      "floor = 0.001\nmax_leg_spread = 1000.0\ncases = [\"fresh-64-decode-48\"]\n"
                      "\n[incumbent]\nref = \"HEAD\"\n")
    flow = FlowProcess(prefect_api, config, f"e2e-gate-{os.getpid()}", tmp / "gate.log")
    code = flow.wait(1800)
    return {"tmp": tmp, "config": config, "code": code, "log": flow.log.read_text()}


def test_a_judged_gate_that_fails_stops_the_run_naming_gate_case_and_ratio(gate_failed):
    """The run fails before the approval gate naming the gate, the case and the measured ratio, and
    the store holds nothing."""
    tmp_path, log = gate_failed["tmp"], gate_failed["log"]
    assert gate_failed["code"] != 0
    failure = re.search(r"GateFailed: lane cpu-smoke: (.*)", log)
    assert failure, log[-6000:]
    assert re.search(r"verdict-abba is fail \(.*case weighted measured [0-9]+\.[0-9]{4}", failure.group(1)), failure.group(1)
    assert "below min_ratio 1000" in failure.group(1)
    assert _published_versions(tmp_path) == []
    # The four verdicts were signed and staged before the run stopped; none is in a store.
    staged = list((tmp_path / "state" / "work").glob("run-*/release/receipts/verdict-*/cpu-smoke.dsse.json"))
    assert sorted(p.parent.name for p in staged) == ["verdict-abba", "verdict-determinism", "verdict-latency",
                                                     "verdict-noninferiority"]
    # The measurements are kept as evidence, keyed by the wheels, the lane and the gate sizes.
    assert len(list((tmp_path / "state" / "judged-evidence").iterdir())) == 1


def _grantor(tmp: Path, config: Path) -> Path:
    """A waiver grantor's key pair, the public key listed in the config; returns the private key."""
    made = subprocess.run([ASSAY, "keys", "new", "--as", "perf-lead", "--dir", str(tmp / "people")],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    pem = re.search(r"-----BEGIN PUBLIC KEY-----.*?-----END PUBLIC KEY-----", made.stdout, re.S).group(0)
    config.write_text(config.read_text() + f'\n[release.waiver_grantors.perf-lead]\npublic_key = """{pem}\n"""\n')
    return next((tmp / "people").glob("perf-lead*.pem"))


def _waive(tmp: Path, key: Path, candidate: Path, case: str, measured: str, name: str, **over) -> Path:
    out = tmp / f"{name}.json"
    args = {"--gate": "abba", "--lane": "cpu-smoke", "--case": case, "--measured": measured, **over}
    proc = subprocess.run([ASSAY, "waive", "--candidate", str(candidate), *[x for kv in args.items() for x in kv],
                           "--reason", "tests: the ratio is accepted", "--as", "perf-lead", "--key", str(key),
                           "--out", str(out), "--id", name], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def test_an_exact_waiver_publishes_the_failed_gate_disclosed_and_acknowledged(prefect_api, gate_failed):
    """The same candidate again with a signed waiver for exactly the measured weighted ratio: the
    measurements are reused (a rerun would measure other noise), the waiver applies, the release
    publishes with the waiver bound, disclosed in the notes and acknowledged by the approval, and
    verify checks the binding. A waiver for another value or case of the same gate does not apply."""
    from releases.canonical import digest

    tmp, config = gate_failed["tmp"], gate_failed["config"]
    measured = re.search(r"case weighted measured ([0-9]+\.[0-9]{4})", gate_failed["log"]).group(1)
    key = _grantor(tmp, config)
    (candidate,) = (tmp / "state" / "work").glob("run-*/release/candidate.json")
    exact = _waive(tmp, key, candidate, "weighted", measured, "abba-weighted")
    wrong_value = _waive(tmp, key, candidate, "weighted", f"{float(measured) + 0.0001:.4f}", "abba-weighted-other")
    wrong_case = _waive(tmp, key, candidate, "fresh-64-decode-48", measured, "abba-fresh")
    name = f"e2e-waived-{os.getpid()}"
    code = ("from flows.release_candidate import release_candidate as f\n"
            f"f.with_options(flow_run_name={name!r})(config={str(config)!r}, "
            f"waivers={[str(exact), str(wrong_value), str(wrong_case)]!r})\n")
    log = tmp / "waived.log"
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **prefect_api}, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    flow = FlowProcess.__new__(FlowProcess)
    flow.proc, flow.log, flow.name = proc, log, name
    run_id = flow.run_id()
    state = wait_for_state(run_id, {"PAUSED"}, timeout_s=1500, poll_s=2)
    assert state == "PAUSED", f"run ended {state} before the gate:\n{log.read_text()[-6000:]}"
    assert "judging the measurements kept as evidence" in log.read_text()
    ids = ["abba-weighted", "abba-weighted-other", "abba-fresh"]
    ok = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "tests: waived",
                  *[x for i in ids for x in ("--waiver", i)])
    assert ok.returncode == 0, ok.stderr
    assert flow.wait() == 0, log.read_text()[-6000:]
    (release,) = _published_versions(tmp)
    manifest = json.loads((release / "manifest.json").read_text())
    assert sorted(w["id"] for w in manifest["waivers"]) == sorted(ids)
    assert manifest["approval"]["approver"] == "local-operator"
    def predicate(path: str) -> dict:
        return json.loads(base64.b64decode(json.loads((release / path).read_text())["payload"]))["predicate"]

    assert predicate(manifest["approval"]["path"])["acknowledged_waivers"] == sorted(ids)
    abba = next(r for r in manifest["receipts"] if r["kind"] == "verdict-abba")
    verdict = predicate(abba["path"])
    assert verdict["verdict"] == "fail" and verdict["judged"]["blocking"] is False
    assert f"{verdict['weighted_ratio']:.4f}" == measured
    applied = {w["id"]: w["applied"] for w in verdict["judged"]["waivers"]}
    assert applied == {"abba-weighted": True, "abba-weighted-other": False, "abba-fresh": False}
    applied_entry = next(w for w in verdict["judged"]["waivers"] if w["applied"])
    assert applied_entry["sha256"] == digest(json.loads(exact.read_text()))
    notes = (release / "notes" / "RELEASE-NOTES.md").read_text()
    assert all(i in notes for i in ids)
    verify = subprocess.run([ASSAY, "verify", "--require-ready", "--json", "--key",
                             str(tmp / "state" / "keys" / "release.pub.pem"), str(release)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
