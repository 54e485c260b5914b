"""The build recipe: wheel + sdist with pypa/build on a Host, in the hermetic environment,
then the source's AOT kernels when its pyproject asks for them (builders.kernels).

`python -m build --no-isolation` uses the build backend already installed next to the
interpreter (no index is reachable by design), so the toolchain is whatever that interpreter
has; its versions go into the record. Artifacts come back through host.get and are digested
three times (on the host, by the transfer, locally); any disagreement is ArtifactMismatch.
"""
from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from builders import kernels, oci_image, variations
from builders.environment import BuildEnv, hermetic_env
from builders.errors import ArtifactMismatch, BuilderError, BuildFailed
from builders.provenance import build_record
from builders.snapshot import as_ref
from builders.treehash import files_digest, git_tree_id
from hosts.base import Host
from hosts.local import LocalHost
from releases.canonical import file_sha256
from releases.schema import validate

Progress = Callable[[str, str, str], None]  # (build label, stream, text)
BUILD_TIMEOUT_S = 1800.0
QUERY_TIMEOUT_S = 120.0
TAIL = 4000

_TOOLCHAIN_PY = """\
import json, platform, importlib.metadata as m
v = {}
for d in ("build", "hatchling", "packaging", "pyproject_hooks"):
    try: v[d] = m.version(d)
    except m.PackageNotFoundError: v[d] = None
print(json.dumps({"python": platform.python_version(),
                  "implementation": platform.python_implementation(), "packages": v}))
"""

_LIST_PY = """\
import hashlib, json, os, sys
out = {}
for n in sorted(os.listdir(sys.argv[1])):
    p = os.path.join(sys.argv[1], n)
    if os.path.isfile(p):
        with open(p, "rb") as f: out[n] = hashlib.sha256(f.read()).hexdigest()
print(json.dumps(out))
"""


@dataclass(frozen=True)
class BuildResult:
    label: str
    record: dict
    artifacts: list[Path]
    subjects: list[dict] = field(default_factory=list)
    log: str = ""


def build(host: Host, candidate: dict, source_dir_local: str | Path, label: str, workdir: str, *,
          python: str | None = None, path: str | None = None, workroot: str | None = None,
          local_dir: str | Path | None = None, timeout: float = BUILD_TIMEOUT_S,
          progress: Progress | None = None, source_uri: str | None = None,
          plan: variations.Plan | None = None, placement: dict | None = None,
          kernel_archs: tuple[int, ...] | None = None, kernels_step: bool = True) -> BuildResult:
    """Build wheel + sdist of the exported source on HOST under WORKDIR (which must not exist).

    PLAN: the side of every variation (builders.variations; default: LABEL's side); the host is
    probed for what it can vary, and the build receipt records what really varied.

    PYTHON is the interpreter on the host (default on a LocalHost: this process's own).
    Artifacts are fetched into LOCAL_DIR (default: WORKDIR/fetched, for a LocalHost).
    SOURCE_URI names the repository in the provenance (builders.provenance.repository_uri).
    PLACEMENT says what kind of host built it (a container, this machine, and why), for the record.
    KERNEL_ARCHS replaces the archs of the source's AOT kernels step (builders.kernels.config).
    KERNELS_STEP=False leaves that step out, for a caller that uses the wheel only (its bytes do not
    depend on the step, which runs after it): the record then lists no kernels target.
    """
    local = isinstance(host, LocalHost)
    if python is None and not local:
        raise BuilderError(f"build {label!r} on host {host.name!r}: pass python= (the "
                           "interpreter path on that host)")
    python = python or sys.executable
    if local_dir is None:
        if not local:
            raise BuilderError(f"build {label!r} on host {host.name!r}: pass local_dir=")
        local_dir = posixpath.join(workdir, "fetched")
    _check_source(candidate, Path(source_dir_local), label)
    if host.exists(workdir):
        raise BuildFailed(label, f"build directory {workdir} already exists; every build "
                                 "starts in a fresh directory")
    benv = hermetic_env(candidate["source_date_epoch"], workdir, label, workroot=workroot,
                        path=path or (os.environ.get("PATH") if local else None), plan=plan,
                        missing=variations.probe(host, python))
    for d in benv.dirs:
        host.mkdir(d)
    source_digest = host.put(source_dir_local, benv.src_dir)
    toolchain = _query_json(host, benv, [python, "-c", _TOOLCHAIN_PY], label)

    argv = [python, "-m", "build", "--no-isolation", "--wheel", "--sdist",
            "--outdir", benv.out_dir, benv.src_dir]
    sink = (lambda stream, text: progress(label, stream, text)) if progress else None
    with _fs_order(host, benv, label):
        result = host.run(benv.wrap(argv), env=benv.env, replace_env=True, cwd=benv.build_dir,
                          timeout=timeout, on_output=sink)
    log = result.stdout + result.stderr
    if result.exit_code != 0:
        raise BuildFailed(label, f"python -m build exited {result.exit_code}", log[-TAIL:])
    kcfg = kernels.config(source_dir_local, kernel_archs) if kernels_step else None
    if kcfg is not None:
        log += _build_kernels(host, benv, python, kcfg, label, timeout, sink, log)

    remote = _query_json(host, benv, [python, "-c", _LIST_PY, benv.out_dir], label)
    _check_outputs(label, remote, log, kcfg is not None)
    artifacts, subjects = _fetch(host, benv, remote, Path(local_dir))

    environment = {**benv.record_environment, "toolchain": toolchain,
                   "command": ["python", "-m", "build", "--no-isolation", "--wheel", "--sdist",
                               "--outdir", "${BUILD_DIR}/out", "${BUILD_DIR}/src"]}
    if kcfg is not None:
        environment["kernels"] = {**kcfg.record(), "command": kernels.shown_command(kcfg)}
    byproducts = [
        {"name": f"build-{label}.log", "digest": {"sha256": hashlib.sha256(log.encode()).hexdigest()}},
        {"name": "source-tree-manifest", "digest": {"sha256": source_digest}},
    ]
    record = build_record(candidate=candidate, ref=as_ref(candidate), label=label,
                          host_name=host.name, environment=environment,
                          varied={**benv.record_varied, **({"placement": placement} if placement else {})},
                          started=result.started_at,
                          finished=result.ended_at, byproducts=byproducts, source_uri=source_uri,
                          targets=["wheel", "sdist"] + (["kernels"] if kcfg is not None else []))
    return BuildResult(label=label, record=record, artifacts=artifacts, subjects=subjects, log=log)


def build_twice(host_a: Host, host_b: Host, candidate: dict, source_dir: str | Path,
                workroot: str, *, local_dir: str | Path | None = None,
                python_a: str | None = None, python_b: str | None = None,
                timeout: float = BUILD_TIMEOUT_S, progress: Progress | None = None,
                source_uri: str | None = None, enabled: tuple[str, ...] = variations.NAMES,
                placements: tuple[dict | None, dict | None] = (None, None),
                kernel_archs: tuple[int, ...] | None = None,
                image_base: Path | None = None) -> tuple[BuildResult, BuildResult]:
    """Build a and b one after the other, b with every ENABLED variation (builders.variations).

    WORKROOT is the path used on the hosts; artifacts come back into LOCAL_DIR/{a,b}
    (default WORKROOT/artifacts on this machine). Remote hosts need python_a / python_b.
    IMAGE_BASE: a root filesystem tarball; each build then also makes the engine's OCI image
    from its own wheel (builders.oci_image), on this machine.
    """
    fetched = Path(local_dir) if local_dir is not None else Path(workroot) / "artifacts"
    a = build(host_a, candidate, source_dir, "a", build_dir(workroot, "a"), python=python_a, workroot=workroot,
              local_dir=fetched / "a", timeout=timeout, progress=progress, source_uri=source_uri,
              plan=variations.plan_for("a"), placement=placements[0], kernel_archs=kernel_archs)
    if image_base is not None:
        a = with_image(a, candidate, Path(image_base))
    plan_b = variations.plan_for("b", enabled)
    dir_b = build_dir(workroot, plan_b["build_path"])
    if host_b.exists(dir_b):  # build_path not varied: b reuses a's path, a's artifacts are fetched
        host_b.remove(dir_b)
    b = build(host_b, candidate, source_dir, "b", dir_b, python=python_b, workroot=workroot,
              local_dir=fetched / "b", timeout=timeout, progress=progress, source_uri=source_uri, plan=plan_b,
              placement=placements[1], kernel_archs=kernel_archs)
    if image_base is not None:
        b = with_image(b, candidate, Path(image_base))
    return a, b


def with_image(result: BuildResult, candidate: dict, rootfs: Path) -> BuildResult:
    """RESULT with the engine's OCI image made from its own fetched wheel: one more artifact and
    subject, the image and layer digests in the receipt (environment.image, byproducts)."""
    wheel = next(p for p in result.artifacts if p.suffix == ".whl")
    pkg = candidate["package"]
    out = wheel.parent / ("-".join(wheel.name.split("-")[:2]) + oci_image.SUFFIX)
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", str(pkg["version"]))[:128]
    rec = oci_image.build_image(rootfs, wheel, out, int(candidate["source_date_epoch"]),
                                ref_name=f"{pkg['name']}:{tag}", workdir=wheel.parent.parent / f".image-{result.label}")
    record = json.loads(json.dumps(result.record))
    record["buildDefinition"]["externalParameters"]["targets"].append("image")
    record["buildDefinition"]["internalParameters"]["environment"]["image"] = {
        **{k: rec[k] for k in ("ref_name", "image_digest", "config_digest", "python", "layers")},
        "base": {"name": rootfs.name, "sha256": file_sha256(rootfs)}, "built_on": "this machine, from the fetched wheel"}
    record["runDetails"]["byproducts"] = sorted(
        record["runDetails"]["byproducts"] + [{"name": f"{out.name}#layer-{i}-{la['role']}",
                                               "digest": {"sha256": la["digest"].removeprefix("sha256:")}}
                                              for i, la in enumerate(rec["layers"])], key=lambda b: b["name"])
    validate("build", record, f"build-{result.label}")
    return replace(result, record=record, artifacts=[*result.artifacts, out],
                   subjects=[*result.subjects, {"name": out.name, "digest": rec["digest"]}])


@contextmanager
def _fs_order(host: Host, benv: BuildEnv, label: str):
    """The source read through disorderfs while the build runs, when the plan varies fs_order; the
    mount is undone whatever happens, so that the build directory can be removed."""
    if benv.plan.get("fs_order") != "b" or "fs_order" in benv.missing:
        yield
        return
    mounted = host.run(variations.fs_order_mount(benv.src_dir), timeout=QUERY_TIMEOUT_S)
    if mounted.exit_code != 0:
        raise BuildFailed(label, f"disorderfs over the source exited {mounted.exit_code}", mounted.stderr[-TAIL:])
    try:
        yield
    finally:
        host.run(variations.fs_order_unmount(benv.src_dir), timeout=QUERY_TIMEOUT_S).check()


def build_dir(workroot: str, side: str) -> str:
    """The build directory of a side: b's is deeper and longer than a's."""
    return posixpath.join(workroot, "a") if side == "a" else posixpath.join(workroot, "bb", "build-b-longer-path")


def _check_source(candidate: dict, source: Path, label: str) -> None:
    """The directory to build must hold exactly the candidate's frozen source."""
    if candidate.get("dirty"):
        actual, expected, what = files_digest(source), candidate["dirty_digest"], "dirty digest"
    else:
        actual, expected, what = git_tree_id(source), candidate["tree"], "git tree"
    if actual != expected:
        raise BuildFailed(label, f"source directory does not hold the candidate's source: "
                                 f"{what} {actual} != {expected}")


def _query_json(host: Host, benv: BuildEnv, argv: list[str], label: str) -> dict:
    res = host.run(argv, env=benv.env, replace_env=True, cwd=benv.build_dir,
                   timeout=QUERY_TIMEOUT_S)
    if res.exit_code != 0:
        raise BuildFailed(label, f"{argv[0]} -c <query> exited {res.exit_code}", res.stderr[-TAIL:])
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError as exc:
        raise BuildFailed(label, f"query printed no JSON: {res.stdout[-200:]!r}") from exc


def _build_kernels(host: Host, benv: BuildEnv, python: str, cfg: kernels.KernelsConfig, label: str,
                   timeout: float, sink, log: str) -> str:
    """The source's AOT kernels step (builders.kernels), after the wheel, in the same environment."""
    listed = _query_json(host, benv, [python, "-c", _LIST_PY, benv.out_dir], label)
    wheel = next((n for n in sorted(listed) if n.endswith(".whl")), None)
    if wheel is None:
        raise BuildFailed(label, "the kernels step needs the wheel, and the build left none", log[-TAIL:])
    argvs, extra, _ = kernels.steps(cfg, python, benv.build_dir, benv.out_dir, wheel,
                                    int(benv.env["SOURCE_DATE_EPOCH"]))
    out = ""
    for argv in argvs:
        res = host.run(benv.wrap(argv), env={**benv.env, **extra}, replace_env=True, cwd=benv.build_dir,
                       timeout=timeout, on_output=sink)
        out += res.stdout + res.stderr
        if res.exit_code != 0:
            raise BuildFailed(label, f"kernels step `python {' '.join(argv[1:3])}` exited {res.exit_code}",
                              out[-TAIL:])
    return out


def _check_outputs(label: str, remote: dict, log: str, with_kernels: bool = False) -> None:
    wheels = [n for n in remote if n.endswith(".whl")]
    sdists = [n for n in remote if n.endswith(".tar.gz")]
    kernel_tars = [n for n in remote if n.endswith(kernels.SUFFIX)]
    others = sorted(set(remote) - set(wheels) - set(sdists) - set(kernel_tars))
    if len(wheels) != 1 or len(sdists) != 1 or others or len(kernel_tars) != int(with_kernels):
        want = "one wheel, one sdist and one kernels tar" if with_kernels else "one wheel and one sdist"
        raise BuildFailed(label, f"expected {want}, got {sorted(remote)}", log[-TAIL:])


def _fetch(host: Host, benv: BuildEnv, remote: dict, local_dir: Path) -> tuple[list[Path], list[dict]]:
    local_dir.mkdir(parents=True, exist_ok=True)
    artifacts, subjects = [], []
    for name in sorted(remote):
        target = local_dir / name
        moved = host.get(posixpath.join(benv.out_dir, name), target)
        if moved != remote[name]:
            raise ArtifactMismatch(name, f"transfer from {host.name}", remote[name], moved)
        here = file_sha256(target)
        if here != remote[name]:
            raise ArtifactMismatch(name, "local copy", remote[name], here)
        artifacts.append(target)
        subjects.append({"name": name, "digest": {"sha256": here}})
    return artifacts, subjects
