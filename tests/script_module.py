"""A repository script loaded as a module, so tests can call its functions (scripts/ is not a
package, and a script's own name need not be importable), or run as a command."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python path args...` from the repository root, its output captured as text."""
    return subprocess.run([sys.executable, str(path), *args], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=timeout)
