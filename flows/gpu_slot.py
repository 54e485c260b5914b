"""One GPU, one lane at a time across every flow: a Prefect global concurrency limit named after
the GPU and its host (`gpu-<kind>-<host>`), created with one slot the first time it is needed."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from flows.errors import GpuSlotUnnamed


def limit_name(gpu_kind: str, host: str) -> str:
    """gpu-<kind>-<host>, lower case, characters outside [a-z0-9-] replaced by '-'."""
    if not gpu_kind or not host:
        raise GpuSlotUnnamed(f"a GPU limit needs a kind and a host, got kind={gpu_kind!r} host={host!r}")
    return re.sub(r"[^a-z0-9-]+", "-", f"gpu-{gpu_kind}-{host}".lower()).strip("-")


def ensure_limit(name: str) -> None:
    """Create the limit with 1 slot unless it exists (an existing limit is left as configured)."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            except ObjectAlreadyExists:
                pass  # another run created it between our read and our create


@contextmanager
def gpu_concurrency_slot(gpu_name: str, host: str | None = None, *,
                         timeout_seconds: float | None = None) -> Iterator[str]:
    """Hold the GPU's slot for the block. gpu_name is either a full limit name ('gpu-h200-node1')
    or, with host, the GPU kind ('h200'). Yields the limit name."""
    name = limit_name(gpu_name, host) if host is not None else gpu_name
    ensure_limit(name)
    with concurrency(name, occupy=1, timeout_seconds=timeout_seconds, strict=True):
        yield name


@contextmanager
def gpu_slot(gpu: str | None, host: str) -> Iterator[str | None]:
    """Hold the lane's GPU slot for the block; lanes without a GPU (CPU lanes) take none."""
    if not gpu:
        yield None
        return
    with gpu_concurrency_slot(gpu, host) as name:
        get_run_logger().info("holding the global concurrency slot %s", name)
        yield name
