"""The CLI as a user runs it: a real subprocess, exit codes and output."""

import json
import subprocess
import sys

import pytest

from tests.gates.stats.inputs import abba_case, even, sha


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gates.stats", *map(str, args)], capture_output=True,
                          text=True, timeout=60, cwd=cwd)


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("cases, code, verdict", [
    ([abba_case("c", even(100, 100))], 0, "pass"),
    ([abba_case("c", even(100, 50))], 1, "fail"),
    ([], 2, "inconclusive"),
])
def test_exit_codes_and_json_record(tmp_path, cases, code, verdict):
    path = write(tmp_path, "abba.json", {"cases": cases})
    out = cli("abba", path, "--json")
    assert out.returncode == code, out.stderr
    record = json.loads(out.stdout)
    assert record["verdict"] == verdict and record["kind"] == "verdict-abba"


def test_table_output_for_each_judge(tmp_path):
    inputs = {
        "abba": {"cases": [abba_case("case-1", even(100, 99))]},
        "latency": {"positions": [{"id": 0, "incumbent_s": 1.0, "candidate_s": 1.1}]},
        "determinism": {"runs": [[{"prompt": "p0", "output_sha256": sha("a")}]] * 2},
        "noninferiority": {"resamples": 200, "determinism_passed": True, "min_perturbed_cases": 1,
                           "metrics": [{"name": "recall", "kind": "difference", "better": "higher", "margin": 0.02}],
                           "pairs": [{"case": "a", "variant": v, "incumbent": {"recall": 0.5},
                                      "candidate": {"recall": 0.5}} for v in range(2)]},
    }
    for kind, data in inputs.items():
        out = cli(kind, write(tmp_path, f"{kind}.json", data))
        assert out.returncode == 0, (kind, out.stdout, out.stderr)
        assert "pass" in out.stdout and f"verdict-{kind}" in out.stdout
    assert "case-1" in cli("abba", tmp_path / "abba.json").stdout


@pytest.mark.parametrize("content, where", [
    ('{"cases": [', "invalid JSON at line 1"),
    ('{"positions": [{"id": 0, "incumbent_s": NaN, "candidate_s": 1}]}', "NaN is not valid JSON"),
    ('{"positions": [{"id": 0, "incumbent_s": -1, "candidate_s": 1}]}', "$.positions[0].incumbent_s"),
])
def test_bad_input_exits_3_naming_file_and_path(tmp_path, content, where):
    path = write(tmp_path, "bad.json", content)
    out = cli("latency", path)
    assert out.returncode == 3 and out.stdout == ""
    assert str(path) in out.stderr and where in out.stderr


def test_missing_file_and_unknown_judge_exit_3(tmp_path):
    out = cli("latency", tmp_path / "absent.json")
    assert out.returncode == 3 and "absent.json: $: cannot read file" in out.stderr
    out = cli("speed", tmp_path / "absent.json")
    assert out.returncode == 3 and "invalid choice" in out.stderr
