"""Pinned host keys: a changed or unknown key is refused; `assay hosts trust` admits it."""
import base64
import shutil

import paramiko
import pytest
from typer.testing import CliRunner

from hosts import HostKeyRejected
from hosts.cli import app
from hosts.inventory import load_inventory
from hosts.known_hosts import fingerprint

pytestmark = pytest.mark.docker


@pytest.fixture
def inv_copy(testbed, tmp_path):
    """The test bed's inventory and client key, with a known_hosts file of the test's own."""
    for name in ("hosts.toml", "id_ed25519", "known_hosts"):
        shutil.copy(testbed.parent / name, tmp_path / name)
    return tmp_path / "hosts.toml"


def _pin_wrong_key(inv_copy) -> paramiko.PKey:
    """Pin, for tb1, a real Ed25519 host key that is not tb1's: tb0's."""
    inv = load_inventory(inv_copy)
    tb0, tb1 = inv.entry("tb0"), inv.entry("tb1")
    line = next(l for l in tb0.known_hosts.read_text().splitlines() if l.startswith(f"[127.0.0.1]:{tb0.port} "))
    wrong = paramiko.Ed25519Key(data=base64.b64decode(line.split()[2]))
    tb1.known_hosts.write_text(f"[127.0.0.1]:{tb1.port} {wrong.get_name()} {wrong.get_base64()}\n")
    return wrong


def test_changed_key_is_refused_naming_both_fingerprints(inv_copy):
    wrong = _pin_wrong_key(inv_copy)
    host = load_inventory(inv_copy).connect("tb1")
    with pytest.raises(HostKeyRejected) as e:
        host.run(["true"])
    assert e.value.host == "tb1"
    assert e.value.pinned == fingerprint(wrong)
    assert e.value.offered != e.value.pinned and e.value.offered.startswith("ssh-ed25519 SHA256:")
    assert e.value.offered in str(e.value) and e.value.pinned in str(e.value) and "tb1" in str(e.value)


def test_unknown_key_is_refused_then_trust_admits_it(inv_copy):
    (inv_copy.parent / "known_hosts").write_text("")
    host = load_inventory(inv_copy).connect("tb1")
    with pytest.raises(HostKeyRejected) as e:
        host.run(["true"])
    assert e.value.pinned is None and "unknown host key" in str(e.value)
    offered = e.value.offered

    runner = CliRunner()
    declined = runner.invoke(app, ["trust", "tb1", "--inventory", str(inv_copy)], input="n\n")
    assert declined.exit_code == 1 and offered in declined.output
    assert (inv_copy.parent / "known_hosts").read_text() == ""

    accepted = runner.invoke(app, ["trust", "tb1", "--inventory", str(inv_copy), "--yes"])
    assert accepted.exit_code == 0, accepted.output
    assert f"pinned {offered}" in accepted.output
    assert load_inventory(inv_copy).connect("tb1").run(["echo", "in"]).stdout == "in\n"


def test_trust_replaces_a_changed_key_and_keeps_others(inv_copy):
    wrong = _pin_wrong_key(inv_copy)
    result = CliRunner().invoke(app, ["trust", "tb1", "--inventory", str(inv_copy), "--yes"])
    assert result.exit_code == 0 and f"currently pinned: {fingerprint(wrong)}" in result.output
    assert load_inventory(inv_copy).connect("tb1").run(["true"]).exit_code == 0
    assert len((inv_copy.parent / "known_hosts").read_text().splitlines()) == 1
