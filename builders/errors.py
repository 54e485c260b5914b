"""Typed errors raised by builders/: each names what was wrong and where."""
from __future__ import annotations


class BuilderError(Exception):
    """Base of every error raised by builders/."""


class SnapshotError(BuilderError):
    """The source could not be frozen (bad ref, missing subdir, unreadable pyproject)."""


class DirtySource(SnapshotError):
    """The working tree under the source subdir differs from the commit."""

    def __init__(self, repo: str, subdir: str, files: list[str]):
        self.repo, self.subdir, self.files = repo, subdir, list(files)
        shown = ", ".join(self.files[:20]) + (" …" if len(self.files) > 20 else "")
        super().__init__(
            f"source {repo!r} has uncommitted changes under {subdir!r}: {shown} "
            f"({len(self.files)} file(s)); commit them or pass allow_dirty=True"
        )


class BuildFailed(BuilderError):
    """The build command ran but did not produce the expected artifacts."""

    def __init__(self, label: str, message: str, output_tail: str = ""):
        self.label, self.output_tail = label, output_tail
        super().__init__(f"build {label!r}: {message}" + (f"\n{output_tail}" if output_tail else ""))


class ArtifactMismatch(BuilderError):
    """An artifact's digest changed between the build host and the local copy."""

    def __init__(self, name: str, where: str, expected: str, actual: str):
        self.name, self.where, self.expected, self.actual = name, where, expected, actual
        super().__init__(f"artifact {name!r}: {where} sha256 {actual} != {expected}")


class CompareError(BuilderError):
    """Two build outputs could not be compared (unreadable archive, bad waiver)."""


class ForeignWaiver(CompareError):
    """A waiver names a different candidate than the one being compared."""

    def __init__(self, waiver_id: str, expected: str, actual: str):
        self.waiver_id = waiver_id
        super().__init__(
            f"waiver {waiver_id!r} belongs to candidate {actual!r}, not {expected!r}; "
            "carry it forward explicitly instead"
        )


class SbomError(BuilderError):
    """An SBOM could not be produced or failed its library's validator."""



class IncumbentError(BuilderError):
    """The incumbent engine could not be resolved: says which source (store, ref, wheel) and why."""

    def __init__(self, origin: str, message: str):
        self.origin, self.message = origin, message
        super().__init__(f"incumbent from {origin}: {message}")
