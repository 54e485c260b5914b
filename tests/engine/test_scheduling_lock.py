"""The scheduling loop gives way: a caller waiting for the lock gets it within a step or two,
not after the running batch has finished."""
from __future__ import annotations

import threading
import time

from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams
from engine.runtime.scheduling_lock import SchedulingLock


def _busy(seconds: float) -> None:
    # Holds the GIL the way a Python-heavy step does; sleep would hand it over.
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _stepping_loop(lock: SchedulingLock, steps: list[int], stop: threading.Event) -> None:
    while not stop.is_set() and steps[0] < 5000:
        with lock:
            _busy(0.001)
            steps[0] += 1
        lock.step_aside()


def test_a_waiting_caller_gets_the_lock_within_two_steps():
    lock, steps, stop = SchedulingLock(), [0], threading.Event()
    loop = threading.Thread(target=_stepping_loop, args=(lock, steps, stop))
    loop.start()
    try:
        waited = []
        for _ in range(20):
            while steps[0] < 10:
                time.sleep(0.001)
            asked = steps[0]
            with lock:
                waited.append(steps[0] - asked)
            time.sleep(0.003)
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive()
    assert steps[0] < 5000, "the loop ran to its end: the caller never got in"
    assert max(waited) <= 2, waited


def test_step_aside_returns_at_once_with_nobody_waiting():
    lock = SchedulingLock()
    t0 = time.perf_counter()
    for _ in range(1000):
        lock.step_aside()
    assert time.perf_counter() - t0 < 0.05
    assert lock.waiting == 0


def test_status_and_submit_are_answered_while_a_long_request_decodes(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=2048, max_concurrency=1,
              max_pending=16)
    steps = [0]
    step = llm.scheduler.step

    def counted():
        step()
        steps[0] += 1

    llm.scheduler.step = counted
    try:
        long = llm.submit([5, 6, 7], SamplingParams(max_new_tokens=400, ignore_eos=True))
        while llm.status()["active"] == 0:
            time.sleep(0.001)
        waited, shorts = [], []
        for i in range(10):
            asked = steps[0]
            status = llm.status()
            waited.append(steps[0] - asked)
            assert status["active"] == 1 and status["pending"] == i
            # a submit takes the same lock: it queues behind the long request at once
            asked = steps[0]
            shorts.append(llm.submit([9, 9, i], SamplingParams(max_new_tokens=1)))
            waited.append(steps[0] - asked)
        assert not long.done, "the long request ended before the checks: make it longer"
        assert len(long.result(120).token_ids) == 400
        assert [len(h.result(60).token_ids) for h in shorts] == [1] * 10
    finally:
        llm.stop()
    assert max(waited) <= 2, waited
