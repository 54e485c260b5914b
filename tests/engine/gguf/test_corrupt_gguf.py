"""A corrupted or truncated GGUF is refused with a GGUFError naming the file and the problem."""
from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest

from engine.gguf_import import GGUFError, UnsupportedGGUFError, import_gguf, validate_gguf
from engine.gguf_import.cli import add_arguments, main


@pytest.fixture(scope="module")
def copy(gguf_path, tmp_path_factory):
    dst = tmp_path_factory.mktemp("corrupt") / "model.gguf"
    shutil.copyfile(gguf_path, dst)
    return dst


def _tensor_info_offset(path) -> int:
    """Offset of the first tensor info (name length) after the metadata, found by the validator's walk."""
    summary = validate_gguf(path)
    data = path.read_bytes()[: summary.data_offset]
    name = b"token_embd.weight"
    return data.index(struct.pack("<Q", len(name)) + name)


def _flip(path, offset: int, mask: int = 0xFF) -> bytes:
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(1)
        f.seek(offset)
        f.write(bytes([old[0] ^ mask]))
    return old


def _restore(path, offset: int, old: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(old)


@pytest.mark.parametrize("where,offset,expect", [
    ("magic", 0, "bad magic"),
    ("version", 4, "unsupported GGUF version"),
    ("tensor count high byte", 15, "tensor count"),
    ("metadata count high byte", 23, "metadata count"),
    ("first key length", 31, "truncated or corrupt header"),
])
def test_flipped_header_byte_is_refused(copy, where, offset, expect):
    old = _flip(copy, offset)
    try:
        with pytest.raises(GGUFError) as err:
            validate_gguf(copy)
        assert expect in str(err.value), (where, str(err.value))
        assert str(copy) in str(err.value)
    finally:
        _restore(copy, offset, old)
    validate_gguf(copy)  # restored: valid again, so the failure above came from the flip


@pytest.mark.parametrize("field,delta,expect", [
    ("n_dims", 8 + 17, "dimensions"),
    ("dim0 high byte", 8 + 17 + 4 + 7, "impossible shape"),
    ("type", 8 + 17 + 4 + 16, "unknown type code"),
    ("offset", 8 + 17 + 4 + 16 + 4 + 7, "needs bytes"),
])
def test_flipped_tensor_info_is_refused(copy, field, delta, expect):
    at = _tensor_info_offset(copy) + delta
    old = _flip(copy, at, 0x40)
    try:
        with pytest.raises(GGUFError, match=expect):
            validate_gguf(copy)
    finally:
        _restore(copy, at, old)
    validate_gguf(copy)


def test_shrunken_dimension_is_caught_against_the_metadata(copy, tmp_path):
    at = _tensor_info_offset(copy) + 8 + 17 + 4   # low byte of token_embd's 576: 0x240 -> 0x200
    old = _flip(copy, at, 0x40)
    try:
        validate_gguf(copy)   # structurally fine: a smaller tensor still fits in the file
        with pytest.raises(GGUFError, match=r"token_embd.weight \[49152, 512\] \(expected \[49152, 576\]\)"):
            import_gguf(copy, tmp_path / "out")
    finally:
        _restore(copy, at, old)


@pytest.mark.parametrize("keep", [0, 10, 4096, 1_000_000, -1])
def test_truncated_file_is_refused(copy, tmp_path, keep):
    size = copy.stat().st_size
    keep = size + keep if keep < 0 else keep
    cut = tmp_path / "cut.gguf"
    with open(copy, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(keep))
    with pytest.raises(GGUFError) as err:
        import_gguf(cut, tmp_path / "out")
    assert str(cut) in str(err.value)
    assert any(w in str(err.value) for w in ("too short", "truncated"))
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_cli_reports_corruption_with_exit_code_2(copy, tmp_path, capsys):
    import argparse
    old = _flip(copy, 0)
    try:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        rc = main(parser.parse_args([str(copy), str(tmp_path / "out")]))
    finally:
        _restore(copy, 0, old)
    assert rc == 2
    assert "bad magic" in capsys.readouterr().err


def _mini_llama(path, arch="llama", tensors=None):
    """A small synthetic GGUF through the gguf package's own writer."""
    import gguf
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(8)
    for name, arr in (tensors or {"token_embd.weight": np.zeros((8, 32), np.float32)}).items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_unsupported_architecture_is_listed(tmp_path):
    path = _mini_llama(tmp_path / "m.gguf", arch="mamba")
    with pytest.raises(UnsupportedGGUFError) as err:
        import_gguf(path, tmp_path / "out")
    assert err.value.items == ["mamba"] and "llama" in err.value.supported


def test_unsupported_tensor_types_are_all_listed(tmp_path):
    path = _mini_llama(tmp_path / "m.gguf", tensors={
        "token_embd.weight": np.zeros((8, 32), np.float32),
        "blk.0.attn_q.weight": np.zeros((32, 32), np.int8),
        "blk.0.attn_k.weight": np.zeros((16, 32), np.int16),
    })
    with pytest.raises(UnsupportedGGUFError) as err:
        import_gguf(path, tmp_path / "out")
    assert err.value.items == ["I16", "I8"]
    assert "Q4_1" in err.value.supported


def test_unknown_tensor_names_are_all_listed(tmp_path):
    path = _mini_llama(tmp_path / "m.gguf", tensors={
        "token_embd.weight": np.zeros((8, 32), np.float32),
        "blk.0.attn_q.bias": np.zeros((32,), np.float32),
        "rope_freqs.weight": np.zeros((4,), np.float32),
    })
    with pytest.raises(UnsupportedGGUFError) as err:
        import_gguf(path, tmp_path / "out")
    assert err.value.items == ["blk.0.attn_q.bias", "rope_freqs.weight"]
