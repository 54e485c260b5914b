"""Digests that identify what is serving: model directory, installed engine package."""
from __future__ import annotations

import hashlib
from pathlib import Path

from engine.digests import file_sha256


def tree_sha256(root: str | Path, *, suffixes: tuple[str, ...] | None = None,
                skip_dirs: tuple[str, ...] = ()) -> str:
    """sha256 over the sorted lines "<relative posix path>\\0<file sha256>\\n" of a tree."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"not a directory: {root}")
    entries = []
    for f in root.rglob("*"):
        rel = f.relative_to(root)
        if not f.is_file() or any(part in skip_dirs for part in rel.parts):
            continue
        if suffixes is not None and f.suffix not in suffixes:
            continue
        entries.append((rel.as_posix(), file_sha256(f)))
    h = hashlib.sha256()
    for rel, digest in sorted(entries):
        h.update(f"{rel}\0{digest}\n".encode("utf-8"))
    return h.hexdigest()


def model_sha256(model_dir: str | Path) -> str:
    """The model directory's digest: every file, by relative path."""
    return tree_sha256(model_dir, skip_dirs=("__pycache__",))


def package_sha256() -> str:
    """Digest of the installed engine package: its .py, .json and .jinja files."""
    import engine
    return tree_sha256(Path(engine.__file__).parent, suffixes=(".py", ".json", ".jinja"),
                       skip_dirs=("__pycache__",))


def kernel_build_id() -> str | None:
    try:
        from engine.kernels.ops import kernel_build_id as kbi
    except Exception:  # the kernels are optional; their absence is reported as null
        return None
    try:
        return str(kbi() if callable(kbi) else kbi)
    except Exception:
        return None
