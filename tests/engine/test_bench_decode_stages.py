"""scripts/bench_decode_stages.py without a GPU: its case parsing, its clear refusals, and the
kernel names it reads from the profiler being the engine's own kernels."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.kernels import triton_decode
from tests.script_module import load_script

stages = load_script(Path(__file__).resolve().parents[2] / "scripts" / "bench_decode_stages.py")


def test_cases_parse_context_by_batch():
    assert stages.parse_cases("32768x8, 1024x1") == [(32768, 8), (1024, 1)]


@pytest.mark.parametrize("text", ["32768", "32768x0", "x8", "32kx8", "32768x8,"])
def test_bad_cases_are_named(text, capsys):
    assert stages.main(["--cases", text]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench_decode_stages: --cases: case") and "CONTEXTxBATCH" in err


def test_refuses_without_cuda(capsys):
    assert stages.main(["--cases", "1024x1"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_stage_names_are_the_launched_kernels():
    # The profiler reports a Triton kernel by its function's name: a rename in triton_decode
    # must show here, not as a missing stage on the GPU.
    assert set(stages.STAGES) == {triton_decode._decode_split_kernel.__name__,
                                  triton_decode._decode_merge_kernel.__name__}


def test_unknown_flush_is_refused():
    with pytest.raises(ValueError, match="flush 'none': expected one of write, read"):
        stages.flush_l2("none")


def test_bad_int8_config_is_named(capsys):
    assert stages.main(["--cases", "1024x1", "--int8-configs", "64,2,5,384,e;64,2,x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench_decode_stages: --int8-configs:") and "'64,2,x'" in err
