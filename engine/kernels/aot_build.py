"""Compile the engine's Triton kernels ahead of time into a kernels artifact (a plain tar).

`python -m engine.kernels.aot_build --out FILE.tar --source-date-epoch N [--arch 90 ...]`

Each launch of engine.kernels.aot_registry goes through the steps Triton's own JIT takes
(JITFunction.run: the binder's specialization, _pack_args, triton.compile), only with a
GPUTarget named here instead of the current GPU's, so no GPU is needed and the entry lands in
TRITON_CACHE_DIR under exactly the key the JIT computes at run time for the same source,
specialization, target, options, ptxas and cache-invalidating environment (engine.kernels.aot_cache).

The artifact holds, per entry, Triton's metadata JSON and the cubin under cache/<key>/, and an
index.json. It is reproducible: a fresh, empty TRITON_CACHE_DIR (a stale entry would ship
unverified), the host path of libdevice replaced by its file name in the metadata (it is only
read when compiling; the key hashes the file's bytes, not its path), and a tar of sorted
members, mtime SOURCE_DATE_EPOCH, uid/gid 0, no owner names, no pax headers. Line info stays
whatever TRITON_DISABLE_LINE_INFO says (the build sets it): it is part of Triton's key.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

INDEX = "index.json"
FORMAT = 1
SHIPPED = ("cubin", "json")   # what a cache hit loads (triton.compiler.CompiledKernel)


class AotBuildError(RuntimeError):
    """The kernels could not be compiled or written; says which and why."""


def _bind(launch, arch: int):
    """JITFunction.run's binding for ARCH: (backend, target, kwargs, bound args, specialization, options)."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", int(arch), 32)
    backend = make_backend(target)
    fn, kwargs = launch.kernel, dict(launch.kwargs)
    # What JITFunction.run adds to the launch's keyword arguments before binding.
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*launch.args, **kwargs)
    return backend, target, kwargs, bound, specialization, options


def launch_identity(launch, arch: int) -> tuple:
    """What Triton's in-memory cache keys a launch by (kernel, specialization, options), plus the
    arch: two launches with the same identity compile to the same cache entry."""
    *_, specialization, options = _bind(launch, arch)
    return launch.kernel.fn.__qualname__, str(specialization), str(options), int(arch)


def compile_launch(launch, arch: int):
    """Triton's JITFunction.run up to the compile, for ARCH instead of the current GPU: (kernel, key, options, signature, constexprs)."""
    from triton.compiler import ASTSource, compile
    from triton.runtime.cache import _base32

    backend, target, kwargs, bound, specialization, options = _bind(launch, arch)
    fn = launch.kernel
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    kernel = compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    return kernel, _base32(kernel.hash), options, signature, constexprs


def compile_entries(archs) -> list[dict]:
    """Compile every registry launch for every arch into TRITON_CACHE_DIR; one dict per cache entry."""
    from engine.kernels.aot_registry import launches

    todo = launches()
    # The registry lists table widths, and Triton keys a launch by divisibility classes of them,
    # so many launches bind to the same specialization: compile each distinct one once (the
    # others would each pay Triton's key computation and cache lookup again; docs/REPRODUCIBILITY.md).
    jobs, seen = [], set()
    for arch in archs:
        for launch in todo:
            ident = launch_identity(launch, arch)
            if ident not in seen:
                seen.add(ident)
                jobs.append((launch, arch))
    # Triton compiles in threads itself (its async compile mode); ptxas and the MLIR passes run
    # outside the GIL. Order does not matter: entries are keyed and sorted.
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda job: compile_launch(*job), jobs))
    entries: dict[str, dict] = {}
    for (launch, arch), (kernel, key, options, signature, constexprs) in zip(jobs, results):
        fn = launch.kernel
        entries.setdefault(key, {
            "kernel": kernel.name, "arch": f"sm_{arch}", "key": key,
            "signature": signature, "constexprs": {fn.arg_names[p[0]]: repr(v) for p, v in constexprs.items()},
            "num_warps": options.num_warps, "num_stages": options.num_stages})
    return sorted(entries.values(), key=lambda e: (e["kernel"], e["arch"], e["key"]))


def build(out: str | Path, source_date_epoch: int, archs=None) -> dict:
    """Compile and write the artifact at OUT; returns its index."""
    import triton
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton import knobs

    from engine.kernels import aot_registry
    cache = Path(knobs.cache.dir)
    if cache.exists() and any(cache.iterdir()):
        raise AotBuildError(f"TRITON_CACHE_DIR {cache} is not empty: every kernels build starts from a fresh "
                            "cache, so that nothing compiled elsewhere is shipped")
    archs = tuple(archs or aot_registry.ARCHS)
    started = time.monotonic()
    entries = compile_entries(archs)
    members: dict[str, bytes] = {}
    for e in entries:
        files = {}
        for ext in SHIPPED:
            name = f"{e['kernel']}.{ext}"
            path = cache / e["key"] / name
            if not path.is_file():
                raise AotBuildError(f"Triton left no {name} in its cache entry {e['key']}")
            data = _portable_metadata(path.read_bytes()) if ext == "json" else path.read_bytes()
            members[f"cache/{e['key']}/{name}"] = data
            files[name] = hashlib.sha256(data).hexdigest()
        e["files"] = files
    index = {"format": FORMAT, "triton": triton.__version__, "archs": [f"sm_{a}" for a in archs],
             "env": dict(sorted(get_cache_invalidating_env_vars().items())), "entries": entries}
    members[INDEX] = (json.dumps(index, indent=1, sort_keys=True) + "\n").encode()
    write_tar(Path(out), members, source_date_epoch)
    print(f"aot_build: {len(entries)} kernel entries for {', '.join(index['archs'])} in "
          f"{time.monotonic() - started:.1f}s -> {Path(out).name}", file=sys.stderr)
    return index


def _portable_metadata(data: bytes) -> bytes:
    meta = json.loads(data)
    meta["extern_libs"] = [[name, os.path.basename(path)] for name, path in meta.get("extern_libs") or []]
    return json.dumps(meta, sort_keys=True).encode()


def write_tar(path: Path, members: dict[str, bytes], mtime: int) -> None:
    """A byte-for-byte reproducible tar: sorted members, fixed mtime/owner/mode, ustar headers only."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(members[name]), int(mtime), 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(members[name]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.kernels.aot_build", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the artifact to write (a .tar)")
    ap.add_argument("--source-date-epoch", type=int, default=None,
                    help="member mtime (default: $SOURCE_DATE_EPOCH)")
    ap.add_argument("--arch", type=int, action="append", help="compute capability, e.g. 90 (repeatable; "
                    "default: the registry's)")
    args = ap.parse_args(argv)
    epoch = args.source_date_epoch if args.source_date_epoch is not None else os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        print("aot_build: pass --source-date-epoch or set SOURCE_DATE_EPOCH", file=sys.stderr)
        return 2
    try:
        build(args.out, int(epoch), args.arch)
    except AotBuildError as e:
        print(f"aot_build: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
