"""A lane of the gpu kind that names its GPU (`gpu = "h200"`) runs only on a host showing that
GPU: on another, preflight ends the lane inconclusive, naming what the host has, so no figures
stand under the wrong GPU's name. On a cpu kind `gpu` names only the slot it holds.

No GPU can run here: a stand-in nvidia-smi on PATH answers the query flags the lane reads."""

from __future__ import annotations

import dataclasses
import os

import pytest

from gates.qualify import qualify
from gates.spec import LaneSpec
from hosts.local import LocalHost
from tests.gates.conftest import smoke_spec

FAKE_SMI = """#!/bin/sh
case "$*" in
  *name,uuid*) echo "{name}, GPU-0000, 570.86.15, 81559 MiB, 700.00 W, 700.00 W";;
  *index,power.limit*) echo "0, 700.00";;
  *compute-apps*) ;;
  *) echo "stand-in nvidia-smi: $*" >&2; exit 9;;
esac
"""


def _fake_smi(tmp_path, monkeypatch, name):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.replace("{name}", name))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def _gpu_spec(tmp_path, gpu):
    # The gpu kind's preflight alone (then the restore), below its default disk floor (40 GiB).
    return LaneSpec(name="gpu-h200", kind="gpu", host="local", model=str(tmp_path), gpu=gpu, phases=("preflight",),
                    lease_path=str(tmp_path / "leases" / "gpu"), settings={"disk_floor_mib": 1})


@pytest.mark.parametrize(("shown", "status"), [("NVIDIA H100 80GB HBM3", "inconclusive"), ("NVIDIA H200", "pass")])
def test_preflight_refuses_a_host_without_the_named_gpu(shown, status, tmp_path, monkeypatch, engine_wheel,
                                                         candidate, signing_key):
    _fake_smi(tmp_path, monkeypatch, shown)
    result = qualify(LocalHost(), _gpu_spec(tmp_path, "h200"), candidate, engine_wheel, tmp_path / "out",
                     key=signing_key)
    preflight = {o.name: o for o in result.phases}["preflight"]
    assert preflight.status == status
    assert preflight.facts["gpu_wanted"] == "h200" and [g["name"] for g in preflight.facts["gpus"]] == [shown]
    if status == "inconclusive":
        assert result.verdict == "inconclusive"
        assert preflight.facts["reason"] == f"lane gpu-h200 names GPU 'h200', but the host shows: {shown}"
    else:
        assert result.verdict == "pass"


def test_a_cpu_lanes_gpu_names_only_its_slot(tmp_path, monkeypatch, engine_wheel, candidate, signing_key):
    _fake_smi(tmp_path, monkeypatch, "NVIDIA H100 80GB HBM3")
    spec = dataclasses.replace(smoke_spec(tmp_path, phases=["preflight"]), gpu="testbed")
    result = qualify(LocalHost(), spec, candidate, engine_wheel, tmp_path / "out", key=signing_key)
    preflight = {o.name: o for o in result.phases}["preflight"]
    assert (result.verdict, preflight.status) == ("pass", "pass") and "gpu_wanted" not in preflight.facts
