"""build_zipapp: the installer as one deterministic file, assay-install-<version>.pyz.

It holds the `releases` package (the installer and the verifier it reuses: *.py and schemas/*.json)
and a __main__ that checks the three dependencies it needs from the interpreter running it
(cryptography, jsonschema, rfc8785: native or not, they are not bundled). Deterministic: members
sorted, every timestamp fixed, permissions fixed, no __pycache__, so the same source gives the same
bytes on any machine (stdlib zipapp writes file mtimes; this writer does not)."""
from __future__ import annotations

import zipfile
from pathlib import Path

from releases.atomic import write_atomic

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
SHEBANG = b"#!/usr/bin/env python3\n"
_MAIN = '''"""assay-install: see docs/INSTALL.md."""
import sys

_missing = []
for _name in ("cryptography", "jsonschema", "rfc8785"):
    try:
        __import__(_name)
    except ImportError:
        _missing.append(_name)
if _missing:
    print("assay-install: error: this interpreter lacks " + ", ".join(_missing) + " (pip install assay-verify, "
          "or run with a python that has them)", file=sys.stderr)
    sys.exit(4)
from releases.install.cli import main

sys.exit(main())
'''


def _members(package_root: Path) -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(package_root.rglob("*")):
        rel = path.relative_to(package_root.parent).as_posix()
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix == ".py" or (path.suffix == ".json" and path.parent.name == "schemas"):
            out.append((rel, path.read_bytes()))
    return out


def zipapp_name(version: str) -> str:
    return f"assay-install-{version}.pyz"


def build_zipapp(out_dir: str | Path, version: str) -> Path:
    """Write OUT_DIR/assay-install-<version>.pyz; returns its path. Same source, same bytes."""
    package_root = Path(__file__).resolve().parents[1]   # releases/
    members = [("__main__.py", _MAIN.encode("utf-8")), *_members(package_root)]
    out = Path(out_dir) / zipapp_name(version)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".zip")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(members):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=9)
    try:
        write_atomic(out, SHEBANG + tmp.read_bytes(), mode=0o755)
    finally:
        tmp.unlink(missing_ok=True)
    return out
