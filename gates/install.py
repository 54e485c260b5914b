"""Install a built engine wheel into a fresh virtual environment on a host, and prove that the
engine the lane then runs is that wheel and not some other copy."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path

from gates.phases import PhaseFailed
from releases.canonical import file_sha256

# The fresh environment reuses the dependencies already installed beside `base_python` through a
# .pth line instead of downloading them: lanes must run offline, and the pinned dependency set is
# the one the incumbent was qualified with. The wheel itself is installed with --no-deps, and the
# identity phase checks that `engine` resolves inside the fresh environment.
ENV_KERNELS = "ENGINE_KERNELS_ARTIFACT"   # engine.kernels.aot_cache.ENV_ARTIFACT
_SITE = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


@dataclass(frozen=True)
class Installed:
    python: str
    venv: str
    wheel_sha256: str
    kernels: str | None = None     # the build's AOT kernels artifact on the host, when it has one

    @property
    def env(self) -> dict[str, str]:
        """A clean environment for the lane's commands: PYTHONPATH and friends from whoever started
        the flow (a worker puts its project on PYTHONPATH) must not reach the engine under test.
        The engine finds the build's kernels artifact through ENGINE_KERNELS_ARTIFACT."""
        env = clean_env(self.venv)
        if self.kernels:
            env[ENV_KERNELS] = self.kernels
        return env

    @property
    def cwd(self) -> str:
        """Run the lane's commands here: `python -c` and `-m` put the working directory first on
        sys.path, and a checkout of the engine's source there would shadow the installed wheel."""
        return self.venv


def clean_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": home,
            "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TZ": "UTC"}


def kernels_beside(wheel: Path) -> Path | None:
    """The build's kernels artifact next to its wheel (NAME-VERSION-kernels.tar), if the build made one."""
    name, version = Path(wheel).name.split("-")[:2]
    found = Path(wheel).with_name(f"{name}-{version}-kernels.tar")
    return found if found.is_file() else None


def put_kernels(host, kernels: Path, workdir: str) -> tuple[str, str]:
    """(path on the host, sha256) of the kernels artifact copied into WORKDIR, its digest checked."""
    remote = posixpath.join(workdir, Path(kernels).name)
    local_sha, remote_sha = file_sha256(kernels), host.put(kernels, remote)
    if remote_sha != local_sha:
        raise PhaseFailed("kernels artifact digest changed in transfer", {"local": local_sha, "remote": remote_sha})
    return remote, local_sha


def install_wheel(host, wheel: Path, workdir: str, base_python: str, timeout: float = 600,
                  kernels: Path | None = None) -> tuple[Installed, dict]:
    """Create `workdir/venv`, install the wheel into it, return the interpreter to use.
    KERNELS (the build's AOT kernels artifact) is copied beside it and handed to the engine."""
    wheel = Path(wheel)
    venv = posixpath.join(workdir, "venv")
    remote_wheel = posixpath.join(workdir, wheel.name)
    host.remove(venv)
    host.mkdir(workdir)
    local_sha = file_sha256(wheel)
    remote_sha = host.put(wheel, remote_wheel)
    if remote_sha != local_sha:
        raise PhaseFailed("wheel digest changed in transfer", {"local": local_sha, "remote": remote_sha})
    base_site = host.run([base_python, "-c", _SITE], timeout=60).check().stdout.strip()
    host.run([base_python, "-m", "venv", "--without-pip", venv], timeout=120).check()
    python = posixpath.join(venv, "bin", "python")
    site = host.run([python, "-c", _SITE], timeout=60).check().stdout.strip()
    pth = posixpath.join(site, "_lane_deps.pth")
    host.run(["sh", "-c", 'printf "%s\\n" "$1" > "$2"', "sh", base_site, pth], timeout=60).check()
    result = host.run([base_python, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                       "--no-compile", "--disable-pip-version-check", "-q", remote_wheel],
                      env=clean_env(workdir), replace_env=True, cwd=workdir, timeout=timeout)
    if result.exit_code != 0:
        raise PhaseFailed("pip could not install the wheel", {"exit_code": result.exit_code, "stderr_tail": result.stderr[-2000:]})
    facts = {"wheel": wheel.name, "wheel_sha256": local_sha}
    remote_kernels = None
    if kernels is not None:
        remote_kernels, facts["kernels_sha256"] = put_kernels(host, kernels, workdir)
        facts["kernels"] = Path(kernels).name
    return Installed(python=python, venv=venv, wheel_sha256=local_sha, kernels=remote_kernels), facts


_IDENTITY = (
    "import json, importlib.metadata as m, engine; "
    "print(json.dumps({'file': engine.__file__, 'version': engine.__version__, "
    "'dist_version': m.version('assay-engine')}))"
)


def check_identity(host, installed: Installed, expected_version: str) -> dict:
    """The engine that imports must be the one just installed, at the candidate's version."""
    out = host.run([installed.python, "-c", _IDENTITY], cwd=installed.cwd, env=installed.env, replace_env=True,
                   timeout=120)
    if out.exit_code != 0:
        raise PhaseFailed("the installed engine does not import", {"stderr_tail": out.stderr[-2000:]})
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    inside = facts["file"].startswith(installed.venv.rstrip("/") + "/")
    facts = {"version": facts["version"], "dist_version": facts["dist_version"], "imported_from_lane_venv": inside}
    if not inside:
        raise PhaseFailed("engine imported from outside the lane's environment", facts)
    if facts["dist_version"] != expected_version or facts["version"] != expected_version:
        raise PhaseFailed(f"installed version is not the candidate's {expected_version}", facts)
    return facts


_SUFFIXES = (".py", ".json", ".jinja")


def wheel_package_sha256(wheel: Path, package: str = "engine") -> str:
    """The engine's package digest (docs/API.md: sha256 over the sorted lines
    "<relative posix path>\\0<file sha256>\\n" of its .py/.json/.jinja files), read from the wheel."""
    import hashlib
    import zipfile

    entries = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir() or not name.startswith(package + "/") or "__pycache__" in name.split("/"):
                continue
            if posixpath.splitext(name)[1] in _SUFFIXES:
                entries.append((name[len(package) + 1:], hashlib.sha256(zf.read(info)).hexdigest()))
    h = hashlib.sha256()
    for rel, digest in sorted(entries):
        h.update(f"{rel}\0{digest}\n".encode("utf-8"))
    return h.hexdigest()


# Runs with the lane's interpreter: the same digest over the installed package, found without
# importing it (find_spec only locates it).
_INSTALLED_DIGEST = r'''
import hashlib, importlib.util, os, sys
root = importlib.util.find_spec("engine").submodule_search_locations[0]
entries = []
for d, dirs, files in os.walk(root):
    dirs[:] = [x for x in dirs if x != "__pycache__"]
    for n in files:
        if os.path.splitext(n)[1] in (".py", ".json", ".jinja"):
            p = os.path.join(d, n)
            entries.append((os.path.relpath(p, root).replace(os.sep, "/"), hashlib.sha256(open(p, "rb").read()).hexdigest()))
h = hashlib.sha256()
for rel, digest in sorted(entries):
    h.update(f"{rel}\0{digest}\n".encode())
print(h.hexdigest())
'''


def installed_package_sha256(host, installed: Installed) -> str:
    out = host.run([installed.python, "-c", _INSTALLED_DIGEST], cwd=installed.cwd, env=installed.env,
                   replace_env=True, timeout=120)
    if out.exit_code != 0:
        raise PhaseFailed("could not digest the installed engine package", {"exit_code": out.exit_code})
    return out.stdout.strip().splitlines()[-1]
