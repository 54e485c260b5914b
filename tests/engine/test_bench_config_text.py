"""engine.benchmarks.kernels' launch-config strings, as the docs' commands pass them."""
from __future__ import annotations

import pytest

from engine.benchmarks.kernels import config_text, parse_config
from engine.kernels.triton_decode import DEFAULT_CONFIGS, MERGE_CHUNK, DecodeConfig


def test_parse_with_early_v_and_merge_chunk():
    assert parse_config("64,2,2,384,e,c64") == DecodeConfig(64, 2, 2, 384, early_v=True, merge_chunk=64)
    assert parse_config("128,4,3,256") == DecodeConfig(128, 4, 3, 256, early_v=False, merge_chunk=MERGE_CHUNK)
    assert parse_config("128,4,3,256,c32").merge_chunk == 32


@pytest.mark.parametrize("cfg", list(DEFAULT_CONFIGS.values()))
def test_text_round_trips_the_pinned_configs(cfg):
    assert parse_config(config_text(cfg)) == cfg


@pytest.mark.parametrize("text", ["64,2,2,384,x", "64,2,2,384,c16,c32", "64,2,2,384,cx"])
def test_bad_config_text_is_refused(text):
    with pytest.raises(ValueError):
        parse_config(text)
