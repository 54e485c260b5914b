"""GGUF file -> Hugging Face model directory, byte-identical for the same input."""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from gguf import GGUFReader
from safetensors.torch import save_file

from engine.digests import file_sha256 as sha256_file
from engine.gguf_import.errors import GGUFError
from engine.gguf_import.header import validate_gguf
from engine.gguf_import.metadata import build_config, build_generation_config, read_fields
from engine.gguf_import.tokenizer_build import build_tokenizer, build_tokenizer_config
from engine.gguf_import.weights import check_tensors, load_state_dict

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
FORMAT = "assay/gguf-import/v1"
FILES = ("config.json", "generation_config.json", "gguf_import.json", "model.safetensors",
         "tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class ImportResult:
    out_dir: Path
    source_sha256: str
    files: dict[str, str]          # file name -> sha256


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def import_gguf(gguf_path: str | Path, out_dir: str | Path, dtype: str = "float32") -> ImportResult:
    """Validates the file, then writes config, weights, tokenizer and templates into out_dir."""
    path = str(gguf_path)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    validate_gguf(path)
    try:
        reader = GGUFReader(path)
    except (ValueError, IndexError, OSError) as e:  # validated above, so this is unexpected
        raise GGUFError(path, f"gguf reader failed: {e}") from None
    meta = read_fields(reader, path)
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    config = build_config(meta, path, dtype, tied)
    check_tensors(reader, path, config)
    tokenizer = build_tokenizer(meta, path)
    if tokenizer.get_vocab_size(with_added_tokens=True) != config["vocab_size"]:
        raise GGUFError(path, f"tokenizer has {tokenizer.get_vocab_size(with_added_tokens=True)} tokens, "
                              f"config says {config['vocab_size']}")
    state = load_state_dict(reader, path, config["num_attention_heads"], config["num_key_value_heads"],
                            DTYPES[dtype])
    source_sha = sha256_file(Path(path))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".import-") as tmp:
        tmp = Path(tmp)
        blobs = {
            "config.json": _json_bytes(config),
            "generation_config.json": _json_bytes(build_generation_config(meta)),
            "tokenizer.json": tokenizer.to_str(pretty=True).encode("utf-8") + b"\n",
            "tokenizer_config.json": _json_bytes(build_tokenizer_config(meta, config["max_position_embeddings"])),
            "gguf_import.json": _json_bytes({"format": FORMAT, "dtype": dtype, "source_name": Path(path).name,
                                             "source_sha256": source_sha}),
        }
        for name, data in blobs.items():
            (tmp / name).write_bytes(data)
        # safetensors orders tensors itself and writes no timestamps; fixed metadata keeps it stable.
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        for name in FILES:
            os.chmod(tmp / name, 0o644)  # the same mode whatever the umask or writer chose
            os.replace(tmp / name, out / name)
    return ImportResult(out, source_sha, {name: sha256_file(out / name) for name in FILES})
