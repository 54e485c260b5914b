"""Run by tests/engine/test_aot_kernels.py in a fresh process (no TRITON_INTERPRET, no earlier JIT
state): install a kernels artifact, then compile registry launches the way Triton's JIT does, and
print what the cache manager served as JSON.

argv: ARTIFACT UNPACK_DIR — TRITON_CACHE_DIR must name an empty writable cache.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.kernels import aot_cache
from engine.kernels.aot_build import compile_launch
from engine.kernels.aot_registry import launches


def main() -> None:
    artifact, unpack = sys.argv[1], Path(sys.argv[2])
    index = aot_cache.install(artifact, unpack_root=unpack)
    todo = launches()
    out = {"index_entries": len(index["entries"]), "served": []}
    # sm_90: shipped, so every compile must be served from the artifact; sm_75: never shipped.
    for arch in (90, 75):
        for launch in todo[:3]:
            kernel, key, *_ = compile_launch(launch, arch)
            paths = [str(p) for p in kernel.metadata_group.values()] if hasattr(kernel, "metadata_group") else []
            cubin = kernel.asm["cubin"]
            out["served"].append({"arch": arch, "kernel": kernel.name, "key": key,
                                  "from_artifact": all(p.startswith(str(unpack)) for p in paths) and bool(paths),
                                  "cubin_bytes": len(cubin)})
    out["status"] = aot_cache.status()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
