"""`python -m gates.stats` on hostile input: bad input exits 3 (never 1, the code of a failed
verdict) with a message naming the file and the JSON path, never a traceback; values from the
input print as written, never as rich markup."""

import json
import os
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.stats.cli import main
from tests.gates.stats.inputs import abba_case, even, sha
from tests.hostile_toml import leaf_paths, set_at


def cli(*args):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gates.stats", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


DEEP = {
    "arrays nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "objects nested 50,000 deep": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "nested 200 deep (parses)": '{"positions": ' + "[" * 200 + "]" * 200 + "}",
}
NUMBERS = {
    "5000-digit integer": "9" * 5000,
    "4000-digit integer": "9" * 4000,
    "integer past 2**63": str(2**63),
    "float overflowing to inf": "1e400",
}


@pytest.mark.parametrize("name", sorted(DEEP))
@pytest.mark.parametrize("as_json", [False, True])
def test_deep_json_is_bad_input(tmp_path, name, as_json):
    path = tmp_path / "deep.json"
    path.write_text(DEEP[name])
    out = cli("latency", path, *(["--json"] if as_json else []))
    assert (out.returncode, out.stdout) == (3, "")
    assert "Traceback" not in out.stderr and str(path) in out.stderr and "nested" in out.stderr


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_numbers_out_of_range_are_bad_input_naming_the_path(tmp_path, name):
    path = tmp_path / "big.json"
    path.write_text('{"positions": [{"id": 0, "incumbent_s": %s, "candidate_s": 1.0}]}' % NUMBERS[name])
    out = cli("latency", path, "--json")
    assert (out.returncode, out.stdout) == (3, "")
    assert "Traceback" not in out.stderr and "$.positions[0].incumbent_s" in out.stderr


def test_files_that_cannot_be_inputs_are_bad_input(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # reading it would block forever
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(3 << 30)  # 3 GiB on paper: refused by its size, nothing read
    nonutf8 = tmp_path / "latin1.json"
    nonutf8.write_bytes(b'{"positions": "\xff"}')
    for path, words in [(tmp_path, "is a directory"), (fifo, "not a regular file"), (sparse, "at most"),
                        (nonutf8, "not UTF-8")]:
        out = cli("latency", path)
        assert out.returncode == 3 and words in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("case_id", ["[/red]x", "[reverse]OK[red]x.txt", "[bold]bold[/bold]", ":smile:"])
def test_case_ids_print_as_written(tmp_path, case_id):
    path = tmp_path / "abba.json"
    path.write_text(json.dumps({"cases": [abba_case(case_id, even(100, 100))]}))
    out = cli("abba", path)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert case_id in out.stdout


VALID = {
    "abba": {"cases": [abba_case("case-1", even(100, 99)), abba_case("case-2", even(100, 100))]},
    "latency": {"positions": [{"id": 0, "incumbent_s": 1.0, "candidate_s": 1.1}]},
    "determinism": {"runs": [[{"prompt": "p0", "output_sha256": sha("a")}]] * 2},
    "noninferiority": {"resamples": 200, "determinism_passed": True, "min_perturbed_cases": 1,
                       "metrics": [{"name": "recall", "kind": "difference", "better": "higher", "margin": 0.02}],
                       "pairs": [{"case": "a", "variant": v, "incumbent": {"recall": 0.5},
                                  "candidate": {"recall": 0.5}} for v in range(2)]},
}
LEAVES = [(kind, path) for kind, doc in VALID.items() for path in leaf_paths(doc) if path]
hostile = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False), st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 1e308, -1e308, 5e-324, 2**63, "", "[/red]", None, True, [], {}, [[[[]]]]]),
    st.text(max_size=20))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(LEAVES), value=hostile, as_json=st.booleans())
def test_any_value_anywhere_is_judged_or_bad_input(capsys, where, value, as_json):
    kind, leaf = where
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.json")
        with open(path, "w") as f:
            json.dump(set_at(VALID[kind], leaf, value), f)
        code = main([kind, path] + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3)
    if code == 3:
        assert out == "" and err.startswith("bad input: ")
    else:
        assert "verdict" in out


@pytest.mark.parametrize("resamples", [2**60, 1_000_001])
def test_a_resample_count_past_the_cap_is_bad_input(tmp_path, resamples):
    # Found by the search above: 2**60 resamples reached numpy's allocator and ended in a traceback.
    path = tmp_path / "ni.json"
    path.write_text(json.dumps({**VALID["noninferiority"], "resamples": resamples}))
    out = cli("noninferiority", path)
    assert (out.returncode, out.stdout) == (3, "")
    assert "Traceback" not in out.stderr and "resamples" in out.stderr and "1000000" in out.stderr, out.stderr


def judge_file(tmp_path, kind, doc):
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(doc))
    return cli(kind, path, "--json")


def assert_bad_input_naming(out, named):
    assert (out.returncode, out.stdout) == (3, "")
    assert "Traceback" not in out.stderr and named in out.stderr, out.stderr


@pytest.mark.parametrize("where, value, named", [
    ("weight", 1e300, "$.cases[0].weight"),
    ("tokens", 1e300, "$.cases[0].legs.A1.tokens"),
    ("seconds", 1e-300, "$.cases[0].legs.A1.seconds"),
    ("seconds", 1e300, "$.cases[0].legs.A1.seconds"),
])
def test_abba_magnitudes_that_overflow_the_weighted_mean_are_bad_input(tmp_path, where, value, named):
    # Found by the search above: weight 1e300 with 1e300 tokens overflowed weight x tokens, and the
    # verdict came out "fail" with a NaN weighted ratio instead of naming the input.
    data = json.loads(json.dumps(VALID["abba"]))
    case = data["cases"][0]
    if where == "weight":
        case["weight"] = value
        case["legs"]["A1"]["tokens"] = 10**12
    else:
        case["legs"]["A1"][where] = value
    assert_bad_input_naming(judge_file(tmp_path, "abba", data), named)


def test_abba_at_the_bounds_is_judged_with_a_finite_ratio(tmp_path):
    data = json.loads(json.dumps(VALID["abba"]))
    for case in data["cases"]:
        case["weight"] = 1_000_000
        for leg in case["legs"].values():
            leg["tokens"], leg["seconds"] = 10**12, 0.000001
    out = judge_file(tmp_path, "abba", data)
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)
    assert verdict["verdict"] == "pass" and verdict["weighted_ratio"] == pytest.approx(1.0)


@pytest.mark.parametrize("doc, named", [
    ({"positions": [{"id": 0, "incumbent_s": 1.7e308, "candidate_s": 1.0}]}, "$.positions[0].incumbent_s"),
    ({"positions": [{"id": 0, "incumbent_s": 1.0, "candidate_s": 1e7}]}, "$.positions[0].candidate_s"),
    ({"relative": 1e308, "positions": [{"id": 0, "incumbent_s": 2.0, "candidate_s": 1.0}]}, "$.relative"),
    ({"absolute_s": 1e300, "positions": [{"id": 0, "incumbent_s": 2.0, "candidate_s": 1.0}]}, "$.absolute_s"),
])
def test_latency_magnitudes_that_overflow_the_allowance_are_bad_input(tmp_path, doc, named):
    # Found by a search over pairs of extreme values: incumbent_s 1.7e308 made the allowance
    # Infinity, and the verdict passed with "Infinity" in its JSON, which is not JSON.
    assert_bad_input_naming(judge_file(tmp_path, "latency", doc), named)


def test_latency_at_the_bounds_is_judged_with_finite_margins(tmp_path):
    out = judge_file(tmp_path, "latency", {"absolute_s": 1e6, "relative": 1e6,
                                           "positions": [{"id": 0, "incumbent_s": 1e6, "candidate_s": 1e6}]})
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)   # strict JSON: Infinity or NaN would not parse below
    json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert verdict["verdict"] == "pass" and verdict["worst"]["margin_s"] == 1e12


EXTREMES = (1.7e308, -1e308, 5e-324, 1e300)


@pytest.mark.parametrize("kind", sorted(VALID))
def test_extreme_values_at_any_two_places_are_bad_input_or_a_strict_json_verdict(kind):
    """Every pair of leaves set to every pair of extreme floats: the judge names the input or
    returns a verdict that is strict JSON (no NaN, no Infinity). One leaf at a time missed the
    overflows the two bounds above were added for."""
    import itertools
    import warnings

    from gates.stats import InputError, judge

    doc = VALID[kind]
    leaves = [p for p in leaf_paths(doc) if p]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # numpy's overflow notes; the verdict is checked
        for (a, b), (va, vb) in itertools.product(itertools.combinations(leaves, 2),
                                                  itertools.product(EXTREMES, repeat=2)):
            data = set_at(set_at(doc, a, va), b, vb)
            try:
                verdict = judge(kind, data)
            except InputError:
                continue
            json.dumps(verdict, allow_nan=False)   # raises ValueError on NaN or Infinity
