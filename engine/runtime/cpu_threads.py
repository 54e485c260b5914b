"""The engine's torch work on the CPU, outside its scheduling thread, runs on threads that end.

Torch's CPU wheels parallelise with GNU OpenMP, which gives every thread that runs a parallel
region a pool of worker threads for the rest of that thread's life. While the pools of a
process hold more threads than the machine has cores, the runtime spins only briefly between
regions (libgomp: 100 spins, not 300,000) before its workers sleep, so every parallel region
wakes them through the kernel. The engine computes
on its scheduling thread; a model loaded on the caller's thread left that thread's pool
alive beside it, and each of the hundreds of products of a decode step then paid the wake.
On the 2-core development machine that made CPU decode about 1.6x slower
(docs/perf/reference-model.md). A thread that ends frees its pool, so the engine's own torch
work anywhere but the scheduling thread runs on a short-lived thread.
"""
from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def on_fresh_thread(fn: Callable[..., T], *args, **kwargs) -> T:
    """fn(*args, **kwargs) run on a new thread that ends with it; its result or its exception."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller as it is
            box["error"] = e

    # Daemon: an interrupted caller leaves, and a process exit does not wait on the work.
    t = threading.Thread(target=target, name="engine-cpu-work", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
