"""A cut-down kernels step for the tests' engine sources: the engine's own aot_build over the
registry's first launches only (the fused RoPE + KV write, the KV write and the decode kernels of
one shape). The whole registry (48 sm_90 entries) takes several seconds a build here and the suite
builds dozens of times; what the pipeline does with the artifact (reproduce, bisect, list in the
SBOM, sign, publish, install, verify) and what the cache manager does with an entry do not depend
on how many entries it holds. tests/builders/test_engine_build.py builds the whole registry, twice,
and requires the same bytes."""
from __future__ import annotations

from pathlib import Path

KERNELS_TABLE = '[tool.assay.kernels]\nmodule = "engine.kernels.aot_build"\n'
LAUNCHES = 8
# Run as a module of the engine (engine/kernels/aot_subset.py) or with `python -c`: the arguments
# are aot_build's own.
SUBSET_MODULE = f"""\
import sys

from engine.kernels import aot_build, aot_registry

_all = aot_registry.launches
aot_registry.launches = lambda: _all()[:{LAUNCHES}]
sys.exit(aot_build.main())
"""


def small_kernels(repo: Path, *, line_info: bool = False) -> None:
    """Point the source's kernels step at SUBSET_MODULE, for sm_90 only (as `make run` compiles);
    with line_info, cubins that embed their source paths."""
    (repo / "engine" / "kernels" / "aot_subset.py").write_text(SUBSET_MODULE)
    pyproject = repo / "engine" / "pyproject.toml"
    text = pyproject.read_text()
    assert KERNELS_TABLE in text, f"{pyproject}: the kernels table moved; update tests/kernels_subset.py"
    table = '[tool.assay.kernels]\nmodule = "engine.kernels.aot_subset"\n'
    pyproject.write_text(text.replace(KERNELS_TABLE, table + ("line_info = true\n" if line_info else "")
                                      + "archs = [90]\n"))
