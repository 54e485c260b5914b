"""The Prefect global concurrency slot a lane takes for its GPU, so that two runs never share one."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator

from prefect import get_run_logger


@contextmanager
def gpu_slot(gpu: str | None, host: str) -> Iterator[str | None]:
    """Hold `gpu-<kind>-<host>` for the block; lanes without a GPU (CPU lanes) take none."""
    if not gpu:
        with nullcontext():
            yield None
        return
    from hosts.concurrency import gpu_concurrency_slot

    with gpu_concurrency_slot(gpu, host) as name:
        get_run_logger().info("holding the global concurrency slot %s", name)
        yield name
