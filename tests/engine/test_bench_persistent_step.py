"""scripts/bench_persistent_step.py without a GPU: its refusal on a machine without an sm_90 GPU,
and its check that the persistent kernel's config runs attention with a merge phase."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.script_module import load_script

step = load_script(Path(__file__).resolve().parents[2] / "scripts" / "bench_persistent_step.py")


@pytest.mark.parametrize("config", ["2,64,128,16,8,1,8,4,3,3,1", "2,64,128,16,8,1,8,4,3,3,1,2"])
def test_config_must_run_attention_with_its_merge_phase(config, capsys):
    with pytest.raises(SystemExit) as e:
        step.main(["--configs", config])
    assert e.value.code == 2
    assert "attn must be 1" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9,
                    reason="an sm_90 GPU runs the benchmark instead of refusing")
def test_refuses_without_an_sm90_gpu():
    with pytest.raises(SystemExit, match="needs an sm_90 GPU"):
        step.main([])
