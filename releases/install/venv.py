"""A release's Python environment: a venv made by the base interpreter, reusing the base's
installed dependencies through a .pth line (offline: nothing is downloaded), with the engine wheel
installed into it by pip --no-deps --no-index. The same recipe the lanes use (gates/install.py)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from releases.install.errors import InstallError

_SITE = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def clean_env(home: str) -> dict[str, str]:
    """Nothing from the caller's environment (PYTHONPATH, a virtualenv) may reach the release."""
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": home,
            "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TZ": "UTC"}


def _run(argv: list[str], where: str, cwd: Path, timeout: float = 600) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env=clean_env(str(cwd)))
    except FileNotFoundError:
        raise InstallError("interpreter not found", where=argv[0]) from None
    except subprocess.TimeoutExpired:
        raise InstallError(f"timed out after {timeout:g}s: {' '.join(argv[:4])}", where=where) from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise InstallError(f"{' '.join(argv[:4])} exited {proc.returncode}: {tail[0]}", where=where)
    return proc.stdout


def make_venv(base_python: str, venv: Path, wheel: Path) -> str:
    """Create VENV, link the base's site-packages, install WHEEL; returns the base purelib."""
    base_site = _run([base_python, "-c", _SITE], base_python, venv.parent).strip()
    _run([base_python, "-m", "venv", "--without-pip", str(venv)], str(venv), venv.parent)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", _SITE], str(venv), venv.parent).strip())
    (site / "_assay_base_deps.pth").write_text(base_site + "\n", encoding="utf-8")
    _run([base_python, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--no-compile",
          "--disable-pip-version-check", "-q", str(wheel)], str(wheel.name), venv.parent)
    return base_site


def check_engine(venv: Path, expected_version: str) -> None:
    """The engine must import from inside VENV at the release's version."""
    code = ("import json, importlib.metadata as m, engine; "
            "print(json.dumps([engine.__file__, m.version('assay-engine')]))")
    import json

    out = _run([str(venv / "bin" / "python"), "-c", code], str(venv), venv)
    path, version = json.loads(out.strip().splitlines()[-1])
    if not path.startswith(str(venv) + "/"):
        raise InstallError(f"the engine imports from outside the release ({path})", where=str(venv))
    if version != expected_version:
        raise InstallError(f"installed engine is {version}, the release is {expected_version}", where=str(venv))
