"""The kernels step of the build recipe: the source's own ahead-of-time kernel compile.

A source opts in with a table in its pyproject.toml:

    [tool.assay.kernels]
    module = "engine.kernels.aot_build"   # run as: python -m MODULE --out FILE --source-date-epoch N
    line_info = false                     # optional; true leaves line info (and source paths) in
    archs = [80, 86, 89, 90]              # optional; default: the module's own registry

The module decides which kernels and specializations to compile; the pipeline only runs it,
after the wheel, on the same host, in the same hermetic environment and under the same
variations, importing the package from the wheel just built (unpacked into the build
directory), with a fresh TRITON_CACHE_DIR and TRITON_HOME inside the build directory and
TRITON_DISABLE_LINE_INFO=1 unless the source asks for line info. Its output,
<wheel name>-<version>-kernels.tar, joins the build's artifacts.
"""
from __future__ import annotations

import posixpath
import tomllib
from dataclasses import dataclass
from pathlib import Path

from builders.errors import BuilderError

SUFFIX = "-kernels.tar"

# The wheel's members keep the wheel's own timestamps (from SOURCE_DATE_EPOCH): with line info on,
# the compiler records each source file's mtime, and the time of unpacking would make it differ.
_UNPACK_PY = """\
import calendar, os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf:
    for info in zf.infolist():
        path = zf.extract(info, sys.argv[2])
        t = calendar.timegm(info.date_time + (0, 0, -1))
        os.utime(path, (t, t))
"""


@dataclass(frozen=True)
class KernelsConfig:
    module: str
    line_info: bool = False
    archs: tuple[int, ...] = ()

    def record(self) -> dict:
        return {"module": self.module, "line_info": self.line_info, "archs": list(self.archs)}


def config(source_dir: str | Path, archs: tuple[int, ...] | None = None) -> KernelsConfig | None:
    """The source's [tool.assay.kernels] table, or None when it has none. ARCHS, when given,
    replaces the table's archs (a pipeline config may build fewer, e.g. only its lanes' GPUs)."""
    path = Path(source_dir) / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        table = tomllib.loads(path.read_text()).get("tool", {}).get("assay", {}).get("kernels")
    except tomllib.TOMLDecodeError as e:
        raise BuilderError(f"{path}: not valid TOML ({e})") from None
    if table is None:
        return None
    where = f"{path.name} [tool.assay.kernels]"
    module, line_info, listed = table.get("module"), table.get("line_info", False), table.get("archs", [])
    if not isinstance(module, str) or not module:
        raise BuilderError(f"{where}: `module` must name the module to run (python -m MODULE)")
    if not isinstance(line_info, bool):
        raise BuilderError(f"{where}: `line_info` must be true or false, got {line_info!r}")
    if not isinstance(listed, list) or not all(isinstance(a, int) and not isinstance(a, bool) for a in listed):
        raise BuilderError(f"{where}: `archs` must be a list of compute capabilities such as 90, got {listed!r}")
    extra = sorted(set(table) - {"module", "line_info", "archs"})
    if extra:
        raise BuilderError(f"{where}: unknown key(s) {extra}")
    return KernelsConfig(module, line_info, tuple(archs) if archs else tuple(listed))


def artifact_name(wheel_name: str) -> str:
    """assay_engine-0.1.0-py3-none-any.whl -> assay_engine-0.1.0-kernels.tar"""
    parts = wheel_name.split("-")
    return f"{parts[0]}-{parts[1]}{SUFFIX}"


def artifact_kind(name: str) -> str:
    """The release's kind of a build artifact: wheel, kernels or sdist."""
    return "wheel" if name.endswith(".whl") else "kernels" if name.endswith(SUFFIX) else "sdist"


def steps(cfg: KernelsConfig, python: str, build_dir: str, out_dir: str, wheel_name: str,
          source_date_epoch: int) -> tuple[list[list[str]], dict[str, str], str]:
    """(commands to run in order, extra environment, artifact name) of the kernels step."""
    root = posixpath.join(build_dir, "kernels")
    site = posixpath.join(root, "site")
    env = {"PYTHONPATH": site, "TRITON_CACHE_DIR": posixpath.join(root, "triton-cache"),
           "TRITON_HOME": posixpath.join(root, "triton-home")}
    if not cfg.line_info:
        env["TRITON_DISABLE_LINE_INFO"] = "1"
    name = artifact_name(wheel_name)
    compile_argv = [python, "-m", cfg.module, "--out", posixpath.join(out_dir, name),
                    "--source-date-epoch", str(int(source_date_epoch))]
    for arch in cfg.archs:
        compile_argv += ["--arch", str(arch)]
    unpack = [python, "-c", _UNPACK_PY, posixpath.join(out_dir, wheel_name), site]
    return [unpack, compile_argv], env, name


def shown_command(cfg: KernelsConfig) -> list[str]:
    """The compile command as the build record shows it (no machine paths)."""
    argv = ["python", "-m", cfg.module, "--out", "${BUILD_DIR}/out/<name>" + SUFFIX, "--source-date-epoch",
            "${SOURCE_DATE_EPOCH}"]
    for arch in cfg.archs:
        argv += ["--arch", str(arch)]
    return argv
