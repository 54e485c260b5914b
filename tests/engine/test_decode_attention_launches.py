"""scripts/decode_attention_launches.py without a GPU: its argument checks and its refusal."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.script_module import load_script

launches = load_script(Path(__file__).resolve().parents[2] / "scripts" / "decode_attention_launches.py")


@pytest.mark.parametrize("args, named", [(["--case", "32768"], "--case '32768'"),
                                         (["--case", "0x8"], "--case '0x8'"),
                                         (["--launches", "0"], "--launches must be at least 1")])
def test_bad_arguments_are_named(args, named, capsys):
    assert launches.main(args) == 2
    assert named in capsys.readouterr().err


def test_refuses_without_cuda(capsys):
    assert launches.main(["--case", "1024x1"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
