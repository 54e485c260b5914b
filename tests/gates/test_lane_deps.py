"""preflight names what the lane host's interpreter lacks before any phase starts an engine: the
engine wheel's own requirements (it installs with --no-deps) and the probes' packages (client-turn
drives the official openai client). Checked on this machine's interpreter, for real."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy
import pytest

from gates import lane_deps
from gates.qualify import qualify
from hosts.local import LocalHost
from tests.gates.conftest import smoke_spec


def test_the_engine_wheel_requirements_are_read_from_its_metadata(engine_wheel):
    reqs = lane_deps.wheel_requirements(engine_wheel)
    names = [r.split(">")[0].split(";")[0].strip() for r in reqs]
    assert "torch" in names and "fastapi" in names and "jsonschema" in names
    assert any(r.startswith("triton") and "platform_system" in r for r in reqs)


def test_what_a_chain_needs_follows_its_phases(engine_wheel):
    assert lane_deps.needed(engine_wheel, ("preflight", "install", "restore")) == {}
    smoke = lane_deps.needed(engine_wheel, ("preflight", "install", "startup-fit", "restore"))
    assert list(smoke) == ["engine wheel"] and "openai" not in str(smoke)
    full = lane_deps.needed(engine_wheel, ("preflight", "install", "client-turn", "restore"))
    assert full["client-turn"] == ["openai"]


def test_the_host_check_names_each_unmet_requirement_and_why():
    reqs = {"engine wheel": ["numpy>=1", "assay-no-such-dist>=1", "numpy>=999", "nothing-here; python_version < '3'"],
            "client-turn": ["openai"]}
    missing, below = lane_deps.missing_on_host(LocalHost(), sys.executable, reqs)
    assert missing == {"engine wheel": ["assay-no-such-dist>=1 (not installed)", f"numpy>=999 (has {numpy.__version__})"]}
    assert below == {}


def test_a_package_seen_only_through_pythonpath_is_missing(tmp_path, monkeypatch):
    # What started the lane may see a package through PYTHONPATH; the lane's venv and its engine
    # run in a clean environment and do not, so the check must not count it as installed.
    extra = tmp_path / "extra"
    info = extra / "assay_pythonpath_only-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: assay-pythonpath-only\nVersion: 1.0\n")
    monkeypatch.setenv("PYTHONPATH", str(extra))
    probe = "from importlib import metadata; print(metadata.version('assay-pythonpath-only'))"
    seen = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.strip()
    assert seen == "1.0"          # visible to a child that inherits the environment
    missing, _ = lane_deps.missing_on_host(LocalHost(), sys.executable, {"engine wheel": ["assay-pythonpath-only>=1"]})
    assert missing == {"engine wheel": ["assay-pythonpath-only>=1 (not installed)"]}


def test_the_check_follows_each_requirement_s_own_requirements(tmp_path):
    # An interpreter that sees this machine's packages plus one installed distribution whose own
    # requirements are unmet: as a fastapi whose telemetry dependency is missing fails at import.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    info = Path(purelib) / "assay_fake_dep-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: assay-fake-dep\nVersion: 1.0\n"
                                   "Requires-Dist: assay-no-such-dist>=2\nRequires-Dist: numpy>=999\n"
                                   "Requires-Dist: numpy>=1\nRequires-Dist: assay-extra-only; extra == \"x\"\n")
    missing, below = lane_deps.missing_on_host(LocalHost(), str(python), {"engine wheel": ["assay-fake-dep>=1"]})
    # The requirement itself is met. What it requires and lacks stops the lane (it would fail at
    # import); what it requires at another version is reported, not blocking.
    assert missing == {"engine wheel": ["assay-fake-dep -> assay-no-such-dist>=2 (not installed)"]}
    assert below == {"engine wheel": [f"assay-fake-dep -> numpy>=999 (has {numpy.__version__})"]}
    with_extra, _ = lane_deps.missing_on_host(LocalHost(), str(python), {"w": ["assay-fake-dep[x]"]})
    assert with_extra["w"] == ["assay-fake-dep -> assay-no-such-dist>=2 (not installed)",
                               "assay-fake-dep -> assay-extra-only (not installed)"]


def test_an_unreadable_wheel_is_named(tmp_path):
    bad = tmp_path / "assay_engine-0.1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(lane_deps.WheelMetadataError, match="assay_engine-0.1.0-py3-none-any.whl: cannot read"):
        lane_deps.wheel_requirements(bad)


@pytest.mark.slow
def test_a_host_lacking_a_requirement_stops_the_lane_in_preflight(tmp_path, engine_wheel, candidate, signing_key):
    # The engine's own wheel with one more requirement, which nothing on this machine provides.
    wheel = tmp_path / engine_wheel.name
    with zipfile.ZipFile(engine_wheel) as src, zipfile.ZipFile(wheel, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.replace(b"Requires-Dist: ", b"Requires-Dist: assay-no-such-dist>=1\nRequires-Dist: ", 1)
            dst.writestr(item, data)
    assert "assay-no-such-dist>=1" in lane_deps.wheel_requirements(wheel)
    result = qualify(LocalHost(), smoke_spec(tmp_path), candidate, wheel, tmp_path / "out", key=signing_key)
    outcomes = {o.name: o for o in result.phases}
    pre = outcomes["preflight"]
    assert pre.status == "inconclusive"
    assert "assay-no-such-dist>=1 (not installed)" in pre.facts["reason"]
    assert pre.facts["host_packages"]["missing"] == {"engine wheel": ["assay-no-such-dist>=1 (not installed)"]}
    assert pre.facts["host_packages"]["unmet_below"] == {}
    assert outcomes["install"].status == "skipped" and outcomes["restore"].status == "pass"
    assert result.verdict == "inconclusive"
