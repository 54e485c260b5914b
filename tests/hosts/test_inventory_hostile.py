"""hosts.toml as hostile input: load_inventory returns an Inventory or raises InventoryError naming
the file, the key path and what was expected; never another exception."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hosts import InventoryError
from hosts.inventory import load_inventory
from tests.hostile_toml import NOT_TOML, leaf_paths, set_at, to_toml, values

VALID = {
    "known_hosts": "kh",
    "hosts": {
        "g1": {"kind": "ssh", "address": "10.0.0.1", "user": "u", "key": "keys/id", "roles": ["gpu"],
               "gpu_kind": "h200", "lanes": ["a"], "power_baseline_w": 700, "connect_timeout": 5.0, "keepalive": 15},
        "me": {"kind": "local"},
        "box": {"kind": "docker", "image": "debian:12", "mounts": ["/a:/b:ro"]},
    },
}
LEAVES = [p for p in leaf_paths(VALID) if p]


def _write(tmp_path, doc) -> str:
    path = tmp_path / "hosts.toml"
    path.write_text(to_toml(doc))
    return path


def test_the_valid_inventory_loads(tmp_path):
    assert sorted(load_inventory(_write(tmp_path, VALID)).hosts) == ["box", "g1", "me"]


@pytest.mark.parametrize("field", ["connect_timeout", "keepalive", "power_baseline_w"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused_where_they_stand(tmp_path, field, value):
    path = _write(tmp_path, set_at(VALID, ["hosts", "g1", field], value))
    with pytest.raises(InventoryError, match="not a finite number") as info:
        load_inventory(path)
    assert info.value.file == str(path) and info.value.key_path == f"/hosts/g1/{field}"


@pytest.mark.parametrize("field, value", [("connect_timeout", 1e308), ("keepalive", 10**18),
                                          ("port", 10**30), ("connect_timeout", "10")])
def test_out_of_range_and_wrong_typed_numbers_are_refused(tmp_path, field, value):
    path = _write(tmp_path, set_at(VALID, ["hosts", "g1", field], value))
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    assert info.value.key_path in (f"/hosts/g1/{field}", "")


@pytest.mark.parametrize("name", sorted(NOT_TOML))
def test_files_that_are_not_toml_are_inventory_errors(tmp_path, name):
    path = tmp_path / "hosts.toml"
    path.write_bytes(NOT_TOML[name])
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    assert info.value.file == str(path)


def test_a_directory_is_an_inventory_error(tmp_path):
    with pytest.raises(InventoryError, match="is a directory"):
        load_inventory(tmp_path)


def test_nul_in_an_address_is_refused(tmp_path):
    path = _write(tmp_path, set_at(VALID, ["hosts", "g1", "address"], "10.0.0.1\x00evil"))
    with pytest.raises(InventoryError, match="NUL") as info:
        load_inventory(path)
    assert info.value.key_path == "/hosts/g1/address"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(leaf=st.sampled_from(LEAVES), value=values)
def test_any_value_anywhere_loads_or_is_an_inventory_error(tmp_path, leaf, value):
    path = _write(tmp_path, set_at(VALID, leaf, value))
    try:
        inv = load_inventory(path)
    except InventoryError as exc:
        assert exc.file == str(path) and exc.message
        return
    assert inv.hosts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_any_bytes_load_or_are_an_inventory_error(tmp_path, data):
    path = tmp_path / "hosts.toml"
    path.write_bytes(data)
    try:
        load_inventory(path)
    except InventoryError as exc:
        assert exc.file == str(path)
