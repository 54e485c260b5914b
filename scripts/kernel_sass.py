"""The decode-attention kernel compiled offline for one GPU arch: its registers, spills and
shared memory, how many programs an SM holds, and the instruction mix of its main loop.

No GPU is needed. The launch is the engine's own (engine.kernels.aot_registry catches it on CPU
tensors), compiled through the AOT build's compile_launch for the arch named, and the cubin is
read with the cuobjdump and nvdisasm that ship with Triton. It shows what limits occupancy and
where a tile's instructions go before device time is spent on timing a change
(docs/perf/kernels.md, "A register cap, and 32-bit KV offsets").

    .venv/bin/python scripts/kernel_sass.py --kv int8 [--shape 8b] [--config 64,2,2,384,e,c64] \\
        [--arch 90] [--page 16] [--json FILE]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# (q heads, kv heads, head_dim): the 8B-class config engine.benchmarks.decode runs, and the
# reference model the gpu-h200 lane's judged gates run in float32.
SHAPES = {"8b": (32, 8, 128), "smollm2-135m": (9, 3, 64)}
KV = {"fp32": ("float32", "float32"), "bf16": ("bfloat16", "bfloat16"), "int8": ("bfloat16", "int8")}
# Per-SM limits from NVIDIA's occupancy tables: registers, shared memory bytes, resident threads
# and programs. Each program also reserves 1 KB of shared memory on these archs.
SM_LIMITS = {80: (65536, 167936, 2048, 32), 86: (65536, 102400, 1536, 16),
             89: (65536, 102400, 1536, 24), 90: (65536, 233472, 2048, 32)}
_INSTR = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
# A buffer the software pipeliner allocates in shared memory for a load it moves ahead (TTGIR):
# its leading dimension is how many tiles of that load can be in flight at once.
_PIPELINE_BUFFER = re.compile(r"(%[\w.]+) = ttg\.local_alloc : \(\) -> !ttg\.memdesc<([0-9x]+)x(\w+),[^>]*mutable>")
_LABEL = re.compile(r"^(\.L_x_\d+):")


def capture(kv: str, shape: str, config_text: str | None, page: int | None = None):
    """The stage-1 launch the engine would make for this cache dtype, shape, config and block size."""
    import torch

    from engine.kernels.aot_registry import PAGE, captured_launches
    from engine.kernels.cache_layout import empty_cache
    from engine.kernels.triton_decode import paged_decode_attention_triton
    compute, cache = (getattr(torch, n) for n in KV[kv])
    cfg = None
    if config_text:
        from engine.benchmarks.kernels import parse_config
        cfg = parse_config(config_text)
    h, kvh, d = SHAPES[shape]
    dims = (2, 5, page or PAGE, kvh, d)
    k = empty_cache(dims, cache, "cpu", v=False)[1]
    v = empty_cache(dims, cache, "cpu", v=True)[1]
    ks = vs = None
    if cache == torch.int8:
        ks, vs = torch.zeros(dims[:-1])[1], torch.zeros(dims[:-1])[1]
    with captured_launches() as caught:
        paged_decode_attention_triton(torch.zeros((2, h, d), dtype=compute), k, v, ks, vs,
                                      torch.zeros((2, 1), dtype=torch.int32),
                                      torch.ones((2,), dtype=torch.int32), d ** -0.5, config=cfg)
    return caught[0]


def _tool(name: str) -> str:
    import triton
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def resources(cubin: Path) -> dict:
    """cuobjdump's resource line for the kernel: REG, STACK, SHARED, LOCAL as ints."""
    out = subprocess.run([_tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True,
                         text=True, check=True).stdout
    line = next(x for x in out.splitlines() if "REG:" in x)
    return {k.lower(): int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", line)}


def main_loop(sass: str) -> list[str]:
    """The instructions of the longest loop (a label up to the branch back to it), predicates dropped.
    A span holding an EXIT is not a loop: TMA waits retry out of line, past the epilogue, and
    branch back into the loop's body."""
    labels, ops = {}, []
    for line in sass.splitlines():
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = len(ops)
            continue
        m = _INSTR.match(line)
        if m:
            ops.append(re.sub(r"^@!?U?P[T0-9]+\s+", "", m.group(1).strip()))
    best = (0, -1)
    for i, op in enumerate(ops):
        target = re.search(r"\((\.L_x_\d+)\)", op) if op.startswith("BRA") else None
        if target and labels.get(target.group(1), i) < i and i - labels[target.group(1)] > best[1] - best[0] \
                and not any(o.startswith("EXIT") for o in ops[labels[target.group(1)]:i]):
            best = (labels[target.group(1)], i)
    return ops[best[0]:best[1] + 1]


def pipeline_buffers(ttgir: str) -> dict[str, str]:
    """{value name: shape} of the loop's shared-memory pipeline buffers, e.g. {"k": "1x64x128xi8"}."""
    found = {}
    for name, dims, elem in _PIPELINE_BUFFER.findall(ttgir):
        found[re.sub(r"_\d+$", "", name.lstrip("%"))] = f"{dims}x{elem}"
    return found


def programs_per_sm(arch: int, regs: int, threads: int, shared: int) -> dict:
    """Resident programs an SM by each limit (registers allocated per warp in units of 256)."""
    max_regs, max_smem, max_threads, max_progs = SM_LIMITS[arch]
    warps = threads // 32
    per_warp = -(-regs * 32 // 256) * 256
    by = {"registers": max_regs // (per_warp * warps), "shared": max_smem // (shared + 1024),
          "threads": max_threads // threads, "programs": max_progs}
    by["resident"] = min(by.values())
    return by


def report(kv: str, shape: str, config_text: str | None, arch: int, page: int | None = None) -> dict:
    from engine.kernels.aot_build import compile_launch
    launch = capture(kv, shape, config_text, page)
    kernel, *_ = compile_launch(launch, arch)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        res = resources(cubin)
        sass = subprocess.run([_tool("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    loop = main_loop(sass)
    buffers = pipeline_buffers(kernel.asm["ttgir"])
    mix = collections.Counter(op.split()[0].split(".")[0] for op in loop)
    threads = 32 * kernel.metadata.num_warps
    shared = kernel.metadata.shared
    return {"kv": kv, "shape": shape, "arch": f"sm_{arch}", "config": config_text or "pinned",
            "num_warps": kernel.metadata.num_warps, "registers": res["reg"], "stack_bytes": res["stack"],
            "shared_bytes": shared, "programs_per_sm": programs_per_sm(arch, res["reg"], threads, shared),
            "pipeline_buffers": buffers, "loop_instructions": len(loop), "loop_local_loads": mix.get("LDL", 0),
            "loop_local_stores": mix.get("STL", 0), "loop_mix": dict(mix.most_common())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kv", choices=sorted(KV), required=True, help="cache dtype (fp32: float32 queries too)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    ap.add_argument("--config", help="launch config 'bn,w,st,split[,e][,n][,cN]' (default: the pinned one)")
    ap.add_argument("--arch", type=int, choices=sorted(SM_LIMITS), default=90)
    ap.add_argument("--page", type=int, help="the cache's block size (default: the engine's, 16)")
    ap.add_argument("--json", help="write the report to this file")
    args = ap.parse_args(argv)
    # Compiled, never interpreted: the variable goes before anything imports the kernels (parsing
    # a config does), into a fresh cache: an entry another build left would be read instead.
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="kernel-sass-"))
    if args.config:
        from engine.benchmarks.kernels import parse_config
        try:
            parse_config(args.config)
        except ValueError as e:
            print(f"kernel_sass: --config {args.config!r}: {e}", file=sys.stderr)
            return 2
    r = report(args.kv, args.shape, args.config, args.arch, args.page)
    occ = r["programs_per_sm"]
    print(f"{r['kv']} {r['shape']} {r['arch']} config {r['config']}: {r['num_warps']} warps, "
          f"{r['registers']} registers a thread, {r['stack_bytes']} bytes of stack, {r['shared_bytes']} bytes shared")
    print(f"programs an SM: {occ['resident']} (registers {occ['registers']}, shared {occ['shared']}, "
          f"threads {occ['threads']}, limit {occ['programs']})")
    print("pipeline buffers (tiles in flight x tile): " + (", ".join(f"{k} {v}" for k, v in r["pipeline_buffers"].items())
                                                           or "none"))
    print(f"main loop: {r['loop_instructions']} instructions a warp, {r['loop_local_loads']} local loads, "
          f"{r['loop_local_stores']} local stores")
    print("  " + ", ".join(f"{k} {v}" for k, v in r["loop_mix"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
