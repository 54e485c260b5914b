"""Why a flow run failed, as types a person (and a test) can tell apart. Each message says what
was found and where to look; none is raised for a condition that could pass on its own."""

from __future__ import annotations


class FlowFailure(Exception):
    """Base of the failures a flow raises itself (library errors keep their own types)."""


class GpuSlotUnnamed(FlowFailure):
    """A lane asks for a GPU slot without naming both the GPU kind and the host."""


class ServiceFailed(FlowFailure):
    """A service `make run` starts (the Prefect server, the worker) exited instead of answering."""


class NotReproducible(FlowFailure):
    """The two builds differ and no waiver names the differences."""


class LaneFailed(FlowFailure):
    """A lane's verdict is not pass."""


class LaneHardwarePending(FlowFailure):
    """A lane bound by evidence has evidence only for other wheel bytes (the engine changed since it
    was qualified) and is not optional: the release is not ready until the lane is run again on its
    host for these bytes and the result imported (docs/LANES.md, Lane evidence)."""


class GateFailed(FlowFailure):
    """A judged gate fails (or cannot decide) and no waiver names exactly its finding."""


class StagedReleaseInvalid(FlowFailure):
    """The staged release directory does not verify."""


class ReleaseRejected(FlowFailure):
    """The approver rejected the candidate: the run fails and nothing is published."""


class NoPublishedRelease(FlowFailure):
    """The store holds no published release (the nightly has nothing to rebuild)."""


class ReproducibilityDrift(FlowFailure):
    """A rebuild of a published candidate no longer gives the published bytes."""


class LaneDispatchFailed(FlowFailure):
    """A lane dispatched to a work pool did not come back with receipts that bind: the pool is
    missing, or its run on the lane host ended FAILED, CRASHED or CANCELLED. Names the lane, the
    pool and the child flow run, where the worker's logs are."""

    def __init__(self, message: str, *, lane: str, pool: str, flow_run_id: str | None = None):
        self.lane, self.pool, self.flow_run_id = lane, pool, flow_run_id
        run = f", flow run {flow_run_id}" if flow_run_id else ""
        super().__init__(f"lane {lane} on work pool {pool}{run}: {message}")


class LaneWorkerLost(LaneDispatchFailed):
    """The worker running a dispatched lane stopped heartbeating (its host died or was cut off)."""


class LaneDispatchTimedOut(LaneDispatchFailed):
    """A dispatched lane was not done (queued or running) within the lane's dispatch_timeout_s."""


class LaneReceiptsRefused(LaneDispatchFailed):
    """The receipts a dispatched lane sent back do not verify: another key, candidate or wheel,
    a missing or altered phase receipt."""


class DispatchedWheelAltered(FlowFailure):
    """On a lane host: the wheel fetched from the staging area is not the one the dispatching run
    sent (its sha256 differs), so the lane does not run."""


class AcceptanceFailed(FlowFailure):
    """A lane's acceptance window, or the upgrade rehearsal, did not pass (its receipt says why)."""
