"""Run by tests/engine/test_aot_registry_coverage.py in a fresh process (no TRITON_INTERPRET: the
binder must see JIT functions): for every block-table width up to MAX_WIDTH, batch 1, 2 and 8,
every dtype pair and shape of the registry, the decode launch's Triton key for sm_90, and whether
engine.kernels.aot_registry lists it. Prints {"checked": N, "missing": {case: [widths]}} as JSON.
"""
from __future__ import annotations

import json

import torch
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.jit import compute_cache_key, create_function_from_signature

from engine.kernels.aot_registry import DTYPES, SHAPES, _cache, captured_launches, launches
from engine.kernels.triton_decode import paged_decode_attention_triton

MAX_WIDTH = 512


def keys(caught, backend) -> set[str]:
    """Triton's in-memory key of each launch, as JITFunction.run computes it before compiling."""
    out = set()
    for launch in caught:
        fn, kw = launch.kernel, dict(launch.kwargs)
        kw["debug"] = kw.get("debug", fn.debug) or knobs.runtime.debug
        kw["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        _, spec, opts = create_function_from_signature(fn.signature, fn.params, backend)(*launch.args, **kw)
        out.add(fn.fn.__name__ + str(compute_cache_key({}, spec, opts)))
    return out


def main() -> None:
    backend = make_backend(GPUTarget("cuda", 90, 32))
    listed = keys(launches(), backend)
    missing: dict[str, list[int]] = {}
    checked = 0
    for (dtype, kv_dtype), s in ((dt, s) for dt in DTYPES for s in SHAPES):
        kc, vc, ks, vs = _cache(s.num_kv_heads, s.head_dim, kv_dtype)
        for batch in (1, 2, 8):
            q = torch.zeros((batch, s.num_heads, s.head_dim), dtype=dtype)
            lens = torch.ones((batch,), dtype=torch.int32)
            for width in range(1, MAX_WIDTH + 1):
                tables = torch.zeros((batch, width), dtype=torch.int32)
                with captured_launches() as caught:
                    paged_decode_attention_triton(q, kc, vc, ks, vs, tables, lens, s.head_dim ** -0.5)
                checked += 1
                if keys(caught, backend) - listed:
                    missing.setdefault(f"{s.name} {dtype} kv {kv_dtype} batch {batch}", []).append(width)
    print(json.dumps({"checked": checked, "listed": len(listed), "missing": missing}))


if __name__ == "__main__":
    main()
