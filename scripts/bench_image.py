"""What the engine image adds to build-twice (docs/PERFORMANCE.md): the base root fs read back from
its docker image, one image per build from the engine wheel at HEAD, and the comparison of the two.
Usage: .venv/bin/python scripts/bench_image.py  (needs a docker daemon; builds the root fs image once)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docker  # noqa: E402

from builders.compare import compare_file  # noqa: E402
from builders.oci_image import build_image, rootfs_from_docker_image  # noqa: E402
from hosts.rootfs_image import ensure_image  # noqa: E402

ENGINE = Path(__file__).resolve().parents[1] / "engine"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", str(ENGINE), "-o", str(tmp / "dist")],
                       check=True, capture_output=True)
        wheel = next((tmp / "dist").glob("*.whl"))
        tag = ensure_image(docker.from_env())
        t = time.perf_counter()
        rootfs = rootfs_from_docker_image(tag, tmp / "rootfs.tar")
        print(f"docker save -> root fs tar: {time.perf_counter() - t:.1f} s")
        for side in "ab":
            (tmp / side).mkdir()
            t = time.perf_counter()
            rec = build_image(rootfs, wheel, tmp / side / "engine.oci.tar", 1700000000, ref_name="assay-engine:bench",
                              workdir=tmp / f"work-{side}")
            print(f"image {side}: {time.perf_counter() - t:.1f} s  {rec['image_digest']}")
        t = time.perf_counter()
        entry, _ = compare_file("engine.oci.tar", tmp / "a" / "engine.oci.tar", tmp / "b" / "engine.oci.tar")
        print(f"compare: {time.perf_counter() - t:.1f} s  identical={entry['identical']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
