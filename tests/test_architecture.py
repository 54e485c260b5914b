"""The layout's rules (shared ARCHITECTURE.md), checked on the source itself: import directions
between the folders, Prefect only under flows/, no import circle anywhere, and what ships in the
pipeline's wheel."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("flows", "builders", "hosts", "gates", "releases", "engine")
# Which of the folders each folder may import (itself included).
ALLOWED = {
    "flows": {"flows", "builders", "gates", "hosts", "releases"},
    "builders": {"builders", "hosts", "releases"},
    "gates": {"gates", "hosts", "releases"},
    "hosts": {"hosts"},
    "releases": {"releases"},
    "engine": {"engine"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """Every module `name` imports, anywhere in the file (lazy imports in functions count too),
    as (dotted name, line); relative imports resolved against the module's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, node.lineno))
            # `from pkg import submodule` imports the submodule too.
            out += [(f"{target}.{alias.name}", node.lineno) for alias in node.names
                    if f"{target}.{alias.name}" in MODULES]
    return out


def _internal(target: str) -> str | None:
    """The project module an import names (the longest known prefix), or None for a library."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in MODULES:
            return candidate
    return None


def test_every_folder_imports_only_what_the_architecture_allows():
    wrong = []
    for name, path in MODULES.items():
        folder = name.split(".")[0]
        for target, line in _imports(name, path):
            top = target.split(".")[0]
            if top in FOLDERS and top not in ALLOWED[folder]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert wrong == []


def test_prefect_is_imported_only_under_flows():
    outside = [f"{path.relative_to(ROOT)}:{line}" for name, path in MODULES.items() if not name.startswith("flows")
               for target, line in _imports(name, path) if target.split(".")[0] == "prefect"]
    assert outside == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def _package_of(module: str) -> str | None:
    """A package's __init__ runs before its submodules: importing a.b imports a as well."""
    parent = module.rpartition(".")[0]
    return parent if parent in MODULES else None


def test_no_import_circle_anywhere():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _ in _imports(name, path):
            internal = _internal(target)
            if internal and internal != name and not name.startswith(internal + "."):
                graph[name].add(internal)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.slow
def test_the_pipeline_wheel_ships_its_five_packages_and_no_test_bed(tmp_path):
    out = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path),
                          str(ROOT)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next(tmp_path.glob("assay-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("assay-")}
    assert tops == {"flows", "builders", "hosts", "gates", "releases"}
    assert [n for n in names if "testbed" in n or n.startswith("tests/")] == []
    assert "releases/stage.py" in names and "flows/steps.py" in names


def test_flows_raise_typed_errors_only():
    """A person (and a test) tells failures apart by type: flows raise no bare builtin errors."""
    bare = {"Exception", "RuntimeError", "LookupError", "KeyError", "ValueError"}
    found = []
    for name, path in MODULES.items():
        if not name.startswith("flows"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name) \
                    and node.exc.func.id in bare:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} raises {node.exc.func.id}")
    assert found == []
