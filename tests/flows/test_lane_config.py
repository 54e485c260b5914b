"""[[lanes]] evidence, public_key / public_key_file and optional: what the schema accepts and refuses,
and the key each lane pins."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flows.config import ConfigError, load_config
from releases.keys import key_id, load_public_key, public_pem

BASE = """
[release]
name = "x"
source = "."
subdir = "engine"
approvers = ["a"]
[store]
kind = "filesystem"
path = "s"
[build]
hosts = ["local", "local"]
[[lanes]]
name = "cpu-smoke"
kind = "cpu-smoke"
host = "local"
[[lanes]]
name = "gpu-h200"
kind = "gpu"
host = "gpu-node1"
model = "/models/m"
"""


def load(tmp_path, extra: str):
    path = tmp_path / "assay.toml"
    path.write_text(BASE + extra)
    return load_config(path)


@pytest.fixture
def pem(tmp_path):
    key = Ed25519PrivateKey.generate().public_key()
    (tmp_path / "lane.pub.pem").write_bytes(public_pem(key))
    return public_pem(key).decode()


def test_an_evidence_lane_pins_its_key_from_a_file_or_inline(tmp_path, pem):
    cfg = load(tmp_path, 'evidence = "ev"\npublic_key_file = "lane.pub.pem"\noptional = true\n')
    lane = cfg.lane("gpu-h200")
    assert lane.evidence == str(tmp_path / "ev") and lane.optional is True and lane.public_key == pem
    assert cfg.lane_keys == {"gpu-h200": pem}
    assert key_id(load_public_key(cfg.lane_keys["gpu-h200"])) == key_id(load_public_key(pem))
    inline = load(tmp_path, f'evidence = "ev"\npublic_key = """{pem}"""\n')
    assert inline.lane("gpu-h200").public_key == pem and inline.lane("gpu-h200").optional is False
    # gates never sees the flow-only keys
    assert "evidence" not in inline.lane_table("gpu-h200") and "public_key" not in inline.lane_table("gpu-h200")


@pytest.mark.parametrize("extra, pointer, words", [
    ('evidence = "ev"\n', "/lanes/1/evidence", "needs its host's public key"),
    ('public_key_file = "lane.pub.pem"\n', "/lanes/1/public_key_file", "needs evidence or work_pool"),
    ('optional = true\n', "/lanes/1", "'evidence' is a dependency of 'optional'"),
    ('evidence = "ev"\npublic_key_file = "lane.pub.pem"\nwork_pool = "p"\n', "/lanes/1/work_pool", "not both"),
    ('evidence = "ev"\npublic_key_file = "lane.pub.pem"\npublic_key = "x"\n', "/lanes/1/public_key", "does not match"),
    ('evidence = "ev"\npublic_key = "not a key"\n', "/lanes/1/public_key", "does not match"),
])
def test_the_config_refuses_incoherent_lane_keys(tmp_path, pem, extra, pointer, words):
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, extra)
    assert caught.value.key_path == pointer, caught.value
    assert words in caught.value.message, caught.value


def test_a_key_file_that_is_no_ed25519_key_names_the_lane(tmp_path):
    (tmp_path / "bad.pem").write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    cfg = load(tmp_path, 'evidence = "ev"\npublic_key_file = "bad.pem"\n')
    with pytest.raises(ConfigError) as caught:
        cfg.lanes
    assert caught.value.key_path == "lanes/1/public_key_file" and "bad.pem" in caught.value.message


@pytest.mark.parametrize("extra, says", [
    ('work_pool = "gpu-pool"\nacceptance = true\n', "a lane with work_pool runs elsewhere"),
    ('evidence = "ev"\npublic_key_file = "lane.pub.pem"\nacceptance = true\n', "a lane with evidence runs elsewhere"),
    ("acceptance = true\n", "runs on host 'gpu-node1', which needs an inventory"),
])
def test_an_acceptance_window_needs_a_host_this_run_reaches(tmp_path, pem, extra, says):
    """The window runs from the release run on the lane's host: refused at load time, naming the lane."""
    with pytest.raises(ConfigError, match=says) as err:
        load(tmp_path, extra)
    assert "/lanes/1/acceptance" in str(err.value)


def test_an_acceptance_window_on_an_inventory_host_loads(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text('inventory = "hosts.toml"\n' + BASE + "acceptance = true\n")
    assert load_config(path).lane("gpu-h200").acceptance is True
