"""assay.toml as hostile input: whatever the file holds, load_config returns a Config or raises
ConfigError naming the file, the key path and what was expected; never another exception."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flows.config import ConfigError, load_config
from tests.hostile_toml import NOT_TOML, leaf_paths, set_at, to_toml, values

VALID = {
    "release": {"name": "x", "source": ".", "subdir": "engine", "approvers": ["a"], "approval_timeout_s": 60},
    "store": {"kind": "filesystem", "path": "s"},
    "build": {"hosts": ["local", "local"]},
    "lanes": [{"name": "cpu-smoke", "kind": "cpu-smoke", "host": "local"}],
}
LEAVES = [p for p in leaf_paths(VALID) if p]


def test_the_valid_document_loads(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(to_toml(VALID))
    assert load_config(path).release_name == "x"


@pytest.mark.parametrize("name", sorted(NOT_TOML))
def test_files_that_are_not_toml_are_config_errors(tmp_path, name):
    path = tmp_path / "assay.toml"
    path.write_bytes(NOT_TOML[name])
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.file == str(path)
    assert str(path) in str(info.value)


def test_a_directory_a_fifo_and_a_huge_file_are_config_errors(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # opening it would block until a writer came
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB on paper, nothing read
    for path, words in [(tmp_path, "is a directory"), (fifo, "not a regular file"), (huge, "at most")]:
        with pytest.raises(ConfigError, match=words) as info:
            load_config(path)
        assert info.value.file == str(path)


@pytest.mark.parametrize("text, key_path, words", [
    ("approval_timeout_s = nan", "/release/approval_timeout_s", "not a finite number"),
    ("approval_timeout_s = inf", "/release/approval_timeout_s", "not a finite number"),
    ("approval_timeout_s = -inf", "/release/approval_timeout_s", "not a finite number"),
    ("approval_timeout_s = 1.5", "/release/approval_timeout_s", "not of type 'integer'"),
    ("approval_timeout_s = \"60\"", "/release/approval_timeout_s", "not of type 'integer'"),
    ("approval_timeout_s = 99999999999999999999", "", "TOML integers are 64-bit"),
])
def test_non_finite_and_wrong_typed_numbers_are_named(tmp_path, text, key_path, words):
    path = tmp_path / "assay.toml"
    path.write_text(to_toml(VALID).replace('"approval_timeout_s" = 60', text))
    with pytest.raises(ConfigError, match=words) as info:
        load_config(path)
    if key_path:
        assert info.value.key_path == key_path


def test_a_huge_value_is_quoted_short(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(to_toml(set_at(VALID, ["store", "kind"], "x" * 500_000)))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key_path == "/store/kind" and len(str(info.value)) < 1000


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(leaf=st.sampled_from(LEAVES), value=values)
def test_any_value_anywhere_loads_or_is_a_config_error(tmp_path, leaf, value):
    path = tmp_path / "assay.toml"
    path.write_text(to_toml(set_at(VALID, leaf, value)))
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        assert exc.file == str(path) and exc.message
        return
    assert cfg.release_name  # what loads is what the schema allows


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_any_bytes_load_or_are_a_config_error(tmp_path, data):
    path = tmp_path / "assay.toml"
    path.write_bytes(data)
    with pytest.raises(ConfigError):
        load_config(path)  # no bytes of 300 make a complete assay.toml
