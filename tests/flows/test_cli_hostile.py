"""`assay` on hostile input, run as a user runs it (the installed console script, a subprocess):
each case exits with its code from the one table (2 usage, 3 bad input, 4 unavailable) and one
clean message; never a traceback, and nothing typed or read is interpreted as rich markup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flows.services import free_port
from hosts import InventoryError
from hosts.inventory import load_inventory
from tests.hostile_toml import leaf_paths, set_at, to_toml, values

ASSAY = str(Path(sys.executable).with_name("assay"))


def assay(*args: str, **env: str) -> subprocess.CompletedProcess:
    # An API nobody listens on: these commands must fail (or not) before any server matters.
    full_env = {**os.environ, "PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api", "COLUMNS": "200", **env}
    out = subprocess.run([ASSAY, *args], capture_output=True, text=True, timeout=180, env=full_env,
                         stdin=subprocess.DEVNULL)
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    return out


def assay_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """The same app in this process (no interpreter start-up): for the many small cases."""
    from flows.cli import app

    with pytest.raises(SystemExit) as exit_:
        app(list(args), prog_name="assay")
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return exit_.value.code, out, err


def test_runs_with_an_unknown_state_is_a_usage_error_naming_the_valid_states():
    out = assay("runs", "--state", "bogus")
    assert out.returncode == 2
    assert "'bogus' is not one of the valid states" in out.stderr and "PAUSED" in out.stderr
    assert "cannot reach" not in out.stderr


@pytest.mark.parametrize("args", [["--state", "[/red]x"], ["--limit", "0"], ["--limit", "99999999999999999999999"]])
def test_runs_bad_options_are_usage_errors(args):
    out = assay("runs", *args)
    assert out.returncode == 2, out.stderr
    assert "cannot reach" not in out.stderr


def test_runs_without_a_server_is_unavailable():
    out = assay("runs", "--state", "paused")
    assert out.returncode == 4
    assert "cannot reach the Prefect API at http://127.0.0.1:" in out.stderr


def test_approve_prints_a_hostile_run_id_as_written():
    out = assay("approve", "[/red]x", "--as", "local-operator", "--reason", "r")
    assert out.returncode == 2
    assert "'[/red]x' is not a flow run id" in out.stderr


HOSTILE_INVENTORIES = {
    "non-UTF-8": b'[hosts.a]\nkind = "\xff"\n',
    "nested 100,000 deep": b"a = " + b"[" * 100_000 + b"]" * 100_000,
    "connect_timeout = nan": b'[hosts.a]\nkind = "local"\nconnect_timeout = nan\n',
    "5000-digit port": b'[hosts.a]\nkind = "local"\nport = ' + b"9" * 5000 + b"\n",
    "wrong type": b'[hosts.a]\nkind = "local"\nport = "22"\n',
    "not TOML": b"[hosts\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_INVENTORIES))
def test_hosts_check_on_a_hostile_inventory_is_bad_input(tmp_path, capsys, name):
    path = tmp_path / "hosts.toml"
    path.write_bytes(HOSTILE_INVENTORIES[name])
    code, out, err = assay_in_process(capsys, "hosts", "check", "--inventory", str(path))
    assert code == 3, err
    assert str(path) in err and out == ""


def test_hosts_check_on_a_directory_or_a_missing_file_is_bad_input(tmp_path, capsys):
    for path, words in [(tmp_path, "is a directory"), (tmp_path / "absent.toml", "file not found")]:
        code, _, err = assay_in_process(capsys, "hosts", "check", "--inventory", str(path))
        assert code == 3 and words in err, err
    out = assay("hosts", "check", "--inventory", str(tmp_path))  # and so through the console script
    assert out.returncode == 3 and "is a directory" in out.stderr


def _unreachable(tmp_path, address: str) -> Path:
    (tmp_path / "kh").write_text("")
    (tmp_path / "id").write_text("")
    path = tmp_path / "hosts.toml"
    path.write_text('known_hosts = "kh"\n[hosts.here]\nkind = "local"\n[hosts.gone]\nkind = "ssh"\n'
                    f'address = {json.dumps(address)}\nport = 1\nuser = "u"\nkey = "id"\nconnect_timeout = 2\n')
    return path


@pytest.mark.parametrize("address", ["127.0.0.1", "[/red]x", "[reverse]OK[red]x"])
def test_hosts_check_with_an_unusable_host_is_unavailable_and_prints_it_as_written(tmp_path, address):
    path = _unreachable(tmp_path, address)
    out = assay("hosts", "check", "--inventory", str(path))
    assert out.returncode == 4, out.stderr
    assert "gone" in out.stderr and " here " in out.stdout
    if "[" in address:
        assert address in out.stdout  # the error names the address, markup and all
    report = json.loads(assay("hosts", "check", "--inventory", str(path), "--json").stdout)
    assert report["here"]["ok"] and not report["gone"]["ok"]


def test_hosts_trust_usage_and_unreachable(tmp_path):
    path = _unreachable(tmp_path, "127.0.0.1")
    out = assay("hosts", "trust", "nope", "--inventory", str(path), "--yes")
    assert out.returncode == 2 and "no host named 'nope'" in out.stderr
    out = assay("hosts", "trust", "here", "--inventory", str(path), "--yes")
    assert out.returncode == 2 and "only ssh hosts have host keys" in out.stderr
    out = assay("hosts", "trust", "gone", "--inventory", str(path), "--yes")
    assert out.returncode == 4 and "could not read the host key of 127.0.0.1:1" in out.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s))
def test_runs_with_any_unknown_state_is_a_usage_error(capsys, state):
    assume(state.upper() not in {"SCHEDULED", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "CRASHED",
                                 "PAUSED", "CANCELLING"})
    code, out, err = assay_in_process(capsys, "runs", "--state", state)
    flat = " ".join(err.replace("│", " ").split())  # click's error panel wraps long values
    assert code == 2 and "is not one of the valid states" in flat and out == ""


LOCAL_ONLY = {"hosts": {"here": {"kind": "local", "roles": ["builder"], "lanes": ["cpu-smoke"]}}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(leaf=st.sampled_from([p for p in leaf_paths(LOCAL_ONLY) if p]), value=values)
def test_hosts_check_on_any_local_inventory_is_ok_or_bad_input(tmp_path, capsys, leaf, value):
    path = tmp_path / "hosts.toml"
    path.write_text(to_toml(set_at(LOCAL_ONLY, leaf, value)))
    try:
        load_inventory(path)
    except InventoryError:
        expected = 3
    else:
        expected = 0  # a valid inventory of local hosts: this machine answers
    code, out, err = assay_in_process(capsys, "hosts", "check", "--inventory", str(path), "--json")
    assert code == expected, err
    if code == 0:
        assert all(r["ok"] for r in json.loads(out).values())
