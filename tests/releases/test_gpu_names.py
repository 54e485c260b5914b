"""A lane's `gpu` against the names nvidia-smi reports, and the GPU names a lane receipt's
preflight recorded, read from whatever a signed record holds (facts are free-form): a malformed
entry names no GPU, never raises."""

import pytest

from releases.evidence import preflight_gpu_names
from releases.gpu_names import gpu_named


@pytest.mark.parametrize(("wanted", "name", "named"), [
    ("h200", "NVIDIA H200", True), ("H200", "NVIDIA H200 NVL", True), ("h200", "NVIDIA H100 80GB HBM3", False),
    ("h100", "NVIDIA H100 80GB HBM3", True), ("h20", "NVIDIA H200", False), ("a100", "NVIDIA A100-SXM4-80GB", True),
])
def test_gpu_named_is_a_whole_word_of_the_name(wanted, name, named):
    assert gpu_named(wanted, name) is named


def _phases(gpus):
    return [{"name": "preflight", "facts": {"gpus": gpus}}, {"name": "install", "facts": {"gpus": [{"name": "X"}]}}]


@pytest.mark.parametrize(("gpus", "names"), [
    ([{"name": "NVIDIA H200"}, {"name": "NVIDIA H100 80GB HBM3"}], ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]),
    ([{"name": "NVIDIA H200"}, "NVIDIA H200", {"name": 7}, None, {}], ["NVIDIA H200"]),
    ("NVIDIA H200", []),
    ({"name": "NVIDIA H200"}, []),
    (None, []),
])
def test_preflight_gpu_names(gpus, names):
    assert preflight_gpu_names(_phases(gpus)) == names


def test_no_preflight_phase_names_none():
    assert preflight_gpu_names([{"name": "install", "facts": {"gpus": [{"name": "NVIDIA H200"}]}}]) == []
