"""Inventory loading: validated on load, errors naming the file, the key path and what was expected."""
import json

import pytest
from typer.testing import CliRunner

from hosts import InventoryError, LocalHost
from hosts.cli import HostsUnavailable, app
from hosts.inventory import load_inventory


def _write(tmp_path, text):
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p


def test_valid_inventory_resolves_paths(tmp_path):
    p = _write(tmp_path, 'known_hosts = "kh"\n[hosts.g1]\nkind = "ssh"\naddress = "10.0.0.1"\nuser = "u"\n'
                         'key = "keys/id"\nroles = ["gpu"]\ngpu_kind = "h200"\nlanes = ["a"]\npower_baseline_w = 700\n'
                         '[hosts.me]\nkind = "local"\n')
    inv = load_inventory(p)
    g1 = inv.entry("g1")
    assert (g1.port, g1.key, g1.known_hosts, g1.power_baseline_w) == (22, tmp_path / "keys/id", tmp_path / "kh", 700)
    assert isinstance(inv.connect("me"), LocalHost)
    with pytest.raises(InventoryError, match="no host named 'nope'"):
        inv.entry("nope")


@pytest.mark.parametrize("text, where, what", [
    ('[hosts.a]\nkind = "ftp"\n', "/hosts/a/kind", "ftp"),
    ('[hosts.a]\nkind = "ssh"\naddress = "x"\nuser = "u"\n', "/hosts/a", "'key' is a required property"),
    ('[hosts.a]\nkind = "local"\nport = 0\n', "/hosts/a/port", "minimum"),
    ('[hosts.a]\nkind = "local"\nroles = ["gpu"]\n', "/hosts/a", "gpu_kind"),
    ('[hosts.a]\nkind = "docker"\n', "/hosts/a", "oneOf"),
    ('[hosts.a]\nkind = "local"\ncolour = 1\n', "/hosts/a", "colour"),
    ('[hosts.a]\nkind = "ssh"\naddress = "x"\nuser = "u"\nkey = "k"\n', "/hosts/a/known_hosts", "pinned"),
    ('hosts = 3\n', "/hosts", "object"),
])
def test_invalid_inventory_names_file_path_and_expectation(tmp_path, text, where, what):
    p = _write(tmp_path, text)
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert e.value.file == str(p) and e.value.key_path == where
    assert what in str(e.value)


def test_unreadable_inventory(tmp_path):
    with pytest.raises(InventoryError, match="file not found"):
        load_inventory(tmp_path / "missing.toml")
    with pytest.raises(InventoryError, match="not valid TOML"):
        load_inventory(_write(tmp_path, "[hosts\n"))


def test_check_local_json(tmp_path):
    p = _write(tmp_path, '[hosts.here]\nkind = "local"\n')
    result = CliRunner().invoke(app, ["check", "--inventory", str(p), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["here"]["ok"] and report["here"]["facts"]["cpu_count"] >= 1


@pytest.mark.docker
def test_check_prints_each_testbed_host(testbed):
    result = CliRunner().invoke(app, ["check", "--inventory", str(testbed)])
    assert result.exit_code == 0, result.output
    for name in ("tb0", "tb1", "tb0-docker", "tb1-docker"):
        assert f" {name} " in result.output
    assert result.output.count("Debian GNU/Linux 12") == 4
    report = json.loads(CliRunner().invoke(app, ["check", "--inventory", str(testbed), "--json"]).output)
    assert report["tb0"]["facts"]["hostname"] == report["tb0-docker"]["facts"]["hostname"]
    assert report["tb0"]["facts"]["hostname"] != report["tb1"]["facts"]["hostname"]


def test_check_reports_unreachable_host(tmp_path):
    (tmp_path / "kh").write_text("")
    (tmp_path / "id").write_text("")
    p = _write(tmp_path, 'known_hosts = "kh"\n[hosts.gone]\nkind = "ssh"\naddress = "127.0.0.1"\nport = 1\n'
                         'user = "u"\nkey = "id"\nconnect_timeout = 2\n')
    result = CliRunner().invoke(app, ["check", "--inventory", str(p), "--json"])
    # the report is printed, then HostsUnavailable ends the command (`assay` maps it to exit 4)
    assert isinstance(result.exception, HostsUnavailable) and result.exception.failed == ["gone"]
    assert "lost" in json.loads(result.output)["gone"]["error"]
