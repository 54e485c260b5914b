"""assay.toml loading: the embedded defaults, and errors that name file, key path and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.config import ConfigError, load_config


def test_embedded_defaults_load_with_the_documented_values():
    cfg = load_config()
    assert cfg.release_name == "local"
    assert [lane.name for lane in cfg.lanes] == ["cpu-smoke", "cpu-reference", "gpu-h200"]
    assert cfg.lanes[1].model.endswith(".assay/models/smollm2-135m-instruct")
    gpu = cfg.lanes[2]
    assert (gpu.kind, gpu.optional, gpu.gates["size"]) == ("gpu", False, "full")
    assert Path(gpu.evidence).name == "gpu-h200" and (Path(gpu.evidence) / "receipts").is_dir()
    assert cfg.store["kind"] == "filesystem" and cfg.store["path"].endswith(".assay/store")
    assert cfg.approvers == ["local-operator"]
    assert (cfg.source / "engine" / "pyproject.toml").exists()


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
"""


@pytest.mark.parametrize("change, pointer, words", [
    (("[store]\nkind = \"filesystem\"\npath = \"s\"", "[store]\nkind = \"ftp\""), "/store/kind", "ftp"),
    (("hosts = [\"local\", \"local\"]", "hosts = [\"local\"]"), "/build/hosts", "too short"),
    (("approvers = [\"a\"]", "approvers = [\"a\"]\ncolour = \"red\""), "/release", "colour"),
    (("kind = \"cpu-smoke\"\nhost", "kind = \"gpu-magic\"\nhost"), "/lanes/0/kind", "gpu-magic"),
    # the lane's GPU is one word of the name nvidia-smi reports (releases/gpu_names.py)
    (("kind = \"cpu-smoke\"\nhost", "kind = \"cpu-smoke\"\ngpu = \"H200 NVL\"\nhost"), "/lanes/0/gpu",
     "does not match"),
    (("approvers = [\"a\"]", "approvers = [\"a\"]\nprivate_markers = \"/srv\""), "/release/private_markers",
     "not of type 'array'"),
])
def test_schema_errors_name_file_key_path_and_expectation(tmp_path, change, pointer, words):
    path = tmp_path / "assay.toml"
    path.write_text(BASE.replace(*change))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.file == str(path)
    assert info.value.key_path == pointer
    assert words in str(info.value)


def test_broken_toml_and_missing_file_are_named(tmp_path):
    bad = tmp_path / "assay.toml"
    bad.write_text("[release\nname=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "absent.toml")


def test_private_markers_are_configurable(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(BASE.replace('approvers = ["a"]', 'approvers = ["a"]\nprivate_markers = ["/srv/ci/", "corp.internal"]'))
    assert load_config(path).private_markers == ["/srv/ci/", "corp.internal"]
    assert load_config().private_markers == []
