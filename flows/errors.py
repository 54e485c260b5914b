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
