"""The engine's wheel and sdist, built from engine/ with pypa/build, ship the engine's packages and
no benchmark or profiler: those stay in engine/benchmarks/, runnable from a checkout only."""
import ast
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
# Names of bench-only code, wherever it might reappear (the server's serving profile is not one).
BENCH_NAME = re.compile(r"bench|profiler|_profile\b")


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("engine-dist")
    # A copy, not the live checkout: building writes nothing into engine/ then.
    src = tmp / "engine"
    shutil.copytree(ENGINE, src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp / "dist"
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist", "--outdir",
                    str(out), str(src)], check=True, capture_output=True, timeout=300)
    wheel = next(out.glob("*.whl"))
    sdist = next(out.glob("*.tar.gz"))
    return wheel, sdist


def _is_bench(name: str) -> bool:
    return any(BENCH_NAME.search(Path(part).stem.lower()) for part in Path(name).parts)


@pytest.mark.slow
def test_the_wheel_holds_the_engine_and_no_benchmarks(dists):
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        sources = {n: z.read(n).decode() for n in names if n.endswith(".py")}
    for module in ("engine/__main__.py", "engine/runtime/llm.py", "engine/model/transformer.py",
                   "engine/cli/generate.py", "engine/kernels/reference.py", "engine/server/app.py",
                   "engine/gguf_import/importer.py"):
        assert module in names, f"{module} missing from {wheel.name}"
    assert [n for n in names if _is_bench(n)] == []
    assert not any(n.startswith("engine/benchmarks") for n in names)
    # Nothing shipped may import what is not shipped.
    importers = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            importers += [(name, m) for m in mods if m.startswith("engine.benchmarks")]
    assert importers == []


@pytest.mark.slow
def test_the_sdist_leaves_the_benchmarks_out(dists):
    _, sdist = dists
    with tarfile.open(sdist) as t:
        names = t.getnames()
    assert any(n.endswith("/runtime/llm.py") for n in names)
    assert [n for n in names if "/benchmarks/" in n or n.endswith("/benchmarks")] == []
