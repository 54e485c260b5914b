"""The engine's scheduling lock: a condition whose stepping loop gives way to waiting callers.

Python's locks are not fair. The scheduler thread releases the lock after a step and takes it
again at once; a submit or a status read waiting on another thread may not be scheduled in
that gap. On a busy CPU such a caller can wait for a whole generation: a request's admission,
/metrics and /health all stall behind the running batch. The loop therefore steps aside after
each step while anyone is waiting, until they have had the lock.
"""
from __future__ import annotations

import threading
import time

# Longest the loop stands aside after one step: a caller that has not taken the lock by then
# is not being kept out by the loop, and the running batch must not wait on it longer.
STEP_ASIDE_LIMIT_S = 0.05
_POLL_S = 0.0002


class SchedulingLock:
    """`with lock:` as with threading.Condition; wait() and notify_all() likewise."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = threading.Lock()
        self._waiting = 0          # threads inside __enter__ that do not hold the lock yet

    def __enter__(self) -> "SchedulingLock":
        with self._count:
            self._waiting += 1
        try:
            self._cond.acquire()
        finally:
            with self._count:
                self._waiting -= 1
        return self

    def __exit__(self, *exc) -> None:
        self._cond.release()

    def wait(self, timeout: float | None = None) -> bool:
        return self._cond.wait(timeout)

    def notify_all(self) -> None:
        self._cond.notify_all()

    @property
    def waiting(self) -> int:
        return self._waiting

    def step_aside(self, limit_s: float = STEP_ASIDE_LIMIT_S) -> None:
        """Called by the loop between steps, not holding the lock: sleep while anyone waits
        for it (each leaves the count once it holds the lock), at most limit_s."""
        if not self._waiting:
            return
        deadline = time.monotonic() + limit_s
        while self._waiting and time.monotonic() < deadline:
            time.sleep(_POLL_S)
