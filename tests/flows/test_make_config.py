"""`make run CONFIG=path/to/assay.toml` and `make stop CONFIG=...`: the main job on another config.
What is under test is the wiring before a Prefect server would be touched (the whole job on a
config is the e2e tests' business: they run the same flow with `config=`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ('[release]\nname = "other"\nsource = "{root}"\nsubdir = "engine"\napprovers = ["a"]\n'
          '[paths]\nstate = "{state}"\n[store]\nkind = "filesystem"\npath = "{state}/store"\n'
          '[build]\nhosts = ["local", "local"]\n[[lanes]]\nname = "cpu-smoke"\nkind = "cpu-smoke"\nhost = "local"\n')


def test_make_run_passes_the_config_as_an_absolute_path(tmp_path):
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "run", "CONFIG=some/assay.toml"], capture_output=True,
                         text=True, timeout=120)
    assert f"-m flows.local_run start --config {ROOT}/some/assay.toml" in dry.stdout
    plain = subprocess.run(["make", "-n", "-C", str(ROOT), "run"], capture_output=True, text=True, timeout=120)
    assert [line.split("-m ", 1)[1].strip() for line in plain.stdout.splitlines()
            if "flows.local_run" in line] == ["flows.local_run start"]


def test_a_missing_or_bad_config_is_named_without_a_traceback(tmp_path):
    run = [sys.executable, "-m", "flows.local_run", "start", "--config"]
    missing = subprocess.run([*run, str(tmp_path / "nope.toml")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert missing.returncode == 2 and "nope.toml" in missing.stdout and "Traceback" not in missing.stdout + missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[release]\nname = "x"\n')
    refused = subprocess.run([*run, str(bad)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert refused.returncode == 2 and "bad.toml" in refused.stdout and "Traceback" not in refused.stderr


def test_make_stop_uses_the_configs_state_directory(tmp_path):
    config = tmp_path / "assay.toml"
    config.write_text(CONFIG.format(root=ROOT, state=tmp_path / "state"))
    stop = subprocess.run(["make", "-s", "-C", str(ROOT), "stop", f"CONFIG={config}"], capture_output=True, text=True,
                          timeout=120)
    assert stop.returncode == 0 and "nothing was running" in stop.stdout
