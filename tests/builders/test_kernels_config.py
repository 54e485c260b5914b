"""The kernels step's configuration: the source's table, and a pipeline config's arch override."""
from __future__ import annotations

import pytest

from builders import kernels
from builders.errors import BuilderError
from flows.config import load_config


def _source(tmp_path, table: str):
    (tmp_path / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n[tool.assay.kernels]\n{table}")
    return tmp_path


def test_source_archs_unless_overridden(tmp_path):
    src = _source(tmp_path, 'module = "m"\narchs = [80, 86, 89, 90]\n')
    assert kernels.config(src).archs == (80, 86, 89, 90)
    assert kernels.config(src, (90,)).archs == (90,)
    assert kernels.config(src, None).record()["archs"] == [80, 86, 89, 90]


def test_bad_archs_named(tmp_path):
    with pytest.raises(BuilderError, match=r"\[tool.assay.kernels\]: `archs` must be a list"):
        kernels.config(_source(tmp_path, 'module = "m"\narchs = "90"\n'))


def test_embedded_defaults_compile_the_declared_gpu_lane_arch():
    cfg = load_config(None)
    assert cfg.kernel_archs == (90,)
    assert any(lane.kind == "gpu" for lane in cfg.lanes)
