"""Build-twice against one build of the engine, side by side in one run (docs/PERFORMANCE.md).

Freezes engine/ at a ref of this repository and measures, alternating so that the machine's load
falls on all alike: one build (plan a, no variation); build a + build b (every variation) both on
this machine; and, when a docker daemon answers, build a here + build b in a build-host container
(what the embedded defaults do), the container's start and removal included and also timed alone.
Prints JSON: the medians, the ratios, and the cost of probing the host for its variations.

    python scripts/bench_reproduce.py [--ref HEAD] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from builders import recipe, snapshot, variations  # noqa: E402
from hosts import build_container  # noqa: E402
from hosts.local import LocalHost  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    host = LocalHost("local")
    candidate = snapshot.freeze(ROOT, ref=args.ref, subdir="engine")
    once, twice, probe, in_container, start = [], [], [], [], []
    docker = build_container.docker_unavailable() is None
    with tempfile.TemporaryDirectory(prefix="assay-bench-repro-") as tmp:
        src = snapshot.export_source(ROOT, candidate, Path(tmp) / "src")
        for i in range(args.rounds):
            t0 = time.perf_counter()
            variations.probe(host, sys.executable)
            probe.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            recipe.build(host, candidate, src, "a", f"{tmp}/one-{i}/a", local_dir=f"{tmp}/one-{i}/out")
            once.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            recipe.build_twice(host, host, candidate, src, f"{tmp}/two-{i}")
            twice.append(time.perf_counter() - t0)
            if docker:
                t0 = time.perf_counter()
                with build_container.build_container("b", variations.HOSTNAMES["b"], log=lambda _: None) as b:
                    start.append(time.perf_counter() - t0)
                    recipe.build_twice(host, b, candidate, src, f"{tmp}/container-{i}", python_b=sys.executable)
                in_container.append(time.perf_counter() - t0)
    m1, m2 = statistics.median(once), statistics.median(twice)
    out = {"ref": candidate["commit"][:12], "rounds": args.rounds,
           "one_build_s": [round(x, 2) for x in once], "build_twice_s": [round(x, 2) for x in twice],
           "probe_s": [round(x, 3) for x in probe], "median_one_s": round(m1, 2),
           "median_twice_s": round(m2, 2), "ratio": round(m2 / m1, 2)}
    if in_container:
        m3 = statistics.median(in_container)
        out |= {"build_twice_b_in_container_s": [round(x, 2) for x in in_container],
                "container_start_s": [round(x, 2) for x in start], "median_twice_b_in_container_s": round(m3, 2),
                "ratio_b_in_container": round(m3 / m1, 2)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
