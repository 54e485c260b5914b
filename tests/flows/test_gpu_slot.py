"""The GPU concurrency slot against a real Prefect server (the shared session fixture)."""
import contextvars
import threading
import time

import pytest

from flows.errors import GpuSlotUnnamed
from flows.gpu_slot import gpu_concurrency_slot, limit_name
from tests.prefect_fixtures import prefect_api  # noqa: F401  (session fixture: a real server)


def test_limit_name():
    assert limit_name("H200", "Node_1") == "gpu-h200-node-1"
    with pytest.raises(GpuSlotUnnamed, match="kind"):
        limit_name("", "x")


@pytest.mark.slow
def test_slot_is_exclusive_and_created_with_limit_one(prefect_api):
    from prefect.client.orchestration import get_client

    order = []

    def hold(tag):
        with gpu_concurrency_slot("testgpu", "hostx", timeout_seconds=60):
            order.append(f"{tag}+")
            time.sleep(1.0)
            order.append(f"{tag}-")

    # Threads do not inherit the fixture's Prefect settings (a context variable): copy them.
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(hold, t)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(order) == 4
    assert order[0][0] == order[1][0] and order[2][0] == order[3][0]  # never interleaved
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name("gpu-testgpu-hostx").limit == 1
