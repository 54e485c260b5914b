"""Bisection on a real build: a hook that writes one varied fact per file, each attributed to its cause
by `assay reproduce --json` (the real command line, real builds under unshare/faketime)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from builders import variations
from tests.builders.conftest import fixture_files, make_repo

# One file per fact the environment can leak into a build; each must be blamed on its own variation.
FACTS_HOOK = """\
import getpass, os, socket, time
from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class FactsHook(BuildHookInterface):
    def initialize(self, version, build_data):
        old = os.umask(0)
        os.umask(old)
        facts = {
            "build_dir": self.root,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "umask": oct(old),
            "tz": str(time.localtime().tm_gmtoff),
            "locale": os.environ.get("LC_ALL", ""),
            "hostname": socket.gethostname(),
            "user": f"{getpass.getuser()} {os.getuid()}",
        }
        out = os.path.join(self.directory, "facts")
        os.makedirs(out, exist_ok=True)
        for name, value in facts.items():
            path = os.path.join(out, f"{name}.txt")
            with open(path, "w") as fh:
                fh.write(value + "\\n")
            build_data["force_include"][path] = f"fixturepkg/facts/{name}.txt"
"""

EXPECTED = {"build_dir": "build_path", "date": "time", "umask": "umask", "tz": "tz", "locale": "locale",
            "hostname": "hostname", "user": "user"}


def facts_repo(root: Path) -> Path:
    files = fixture_files(clock_hook=True)
    files["pkg/hatch_build.py"] = FACTS_HOOK
    return make_repo(root / "facts-src", files)


def assay(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "assay"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_reproduce_attributes_each_leaked_fact_to_its_variation(tmp_path):
    repo = facts_repo(tmp_path)
    proc = assay("reproduce", "--source", str(repo), "--subdir", "pkg", "--workdir", str(tmp_path / "run"), "--json")
    assert proc.returncode == 1, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["identical"] is False
    for name in variations.NAMES:
        assert out["variations"][name]["varied"] is True, (name, out["variations"][name])
    causes = {d["member"]: d["cause"] for d in out["differences"] if d["artifact"].endswith(".whl")}
    got = {fact: causes.get(f"fixturepkg/facts/{fact}.txt") for fact in EXPECTED}
    assert got == EXPECTED
    # RECORD lists the digest of every member above: each of their variations alone changes it.
    assert set(causes["fixture_pkg-1.2.3.dist-info/RECORD"].split("+")) == set(EXPECTED.values())
    # The sdist ships the hook's source, not its output: identical, so nothing to attribute there.
    assert not [d for d in out["differences"] if d["artifact"].endswith(".tar.gz")]
    trials = [t["variation"] for t in out["trials"]]
    assert trials == ["control"] + list(variations.NAMES)
    assert next(t for t in out["trials"] if t["variation"] == "control")["differing"] == 0
    # diffoscope evidence for the differing wheel, bound by digest in the record.
    record = json.loads((tmp_path / "run" / "reproducibility.json").read_text())
    [evidence] = record["evidence"]
    assert evidence["artifact"].endswith(".whl")
    html = tmp_path / "run" / "evidence" / evidence["html"]["name"]
    assert html.is_file() and b"facts/hostname.txt" in html.read_bytes()
    from releases.canonical import file_sha256
    assert file_sha256(html) == evidence["html"]["sha256"]
    report = json.loads((tmp_path / "run" / "evidence" / evidence["json"]["name"]).read_text())
    assert report["source1"].endswith(".whl") and report["details"]


@pytest.mark.slow
def test_a_nondeterministic_member_is_not_blamed_on_a_variation(tmp_path):
    """The clock hook stamps time.time_ns(): it differs with nothing varied (the control trial)."""
    repo = make_repo(tmp_path / "clock-src", fixture_files(clock_hook=True))
    proc = assay("reproduce", "--source", str(repo), "--subdir", "pkg", "--workdir", str(tmp_path / "run"),
                 "--variations", "umask,tz", "--json")
    assert proc.returncode == 1, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    stamp = next(d for d in out["differences"] if d["member"] == "fixturepkg/_stamp.py")
    assert stamp["cause"] == "nondeterministic"
    assert [t["variation"] for t in out["trials"]] == ["control", "umask", "tz"]
    assert out["variations"]["hostname"] == {**out["variations"]["hostname"], "varied": False,
                                             "not_varied": "not asked for (--variations)"}


def test_unknown_variation_is_bad_input(tmp_path):
    proc = assay("reproduce", "--source", str(tmp_path), "--variations", "umask,colour", "--json")
    assert proc.returncode == 3
    assert "colour" in proc.stderr and "umask" in proc.stderr and "Traceback" not in proc.stderr
