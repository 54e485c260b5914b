"""Typed errors of the release layer; each carries what a person needs to act."""
from __future__ import annotations

from dataclasses import dataclass


class ReleaseError(Exception):
    """Base of every error raised by releases/."""


class RecordError(ReleaseError):
    """A record is malformed, inconsistent, or about another candidate."""

    def __init__(self, message: str, *, where: str = "") -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class SchemaError(RecordError):
    """A record does not validate against its JSON Schema."""

    def __init__(self, kind: str, where: str, path: str, message: str) -> None:
        self.kind = kind
        self.path = path
        location = where or "<record>"
        super().__init__(
            f"{kind} record {location} at {path or '/'}: {message}", where=where
        )
        self.message = message


class KeyFileError(ReleaseError):
    """A key file is missing, unreadable, malformed or too widely readable."""


@dataclass(frozen=True)
class Failure:
    """One failed check: the file (relative to the release) and the field in it."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        field = f" [{self.field}]" if self.field else ""
        return f"{self.file}{field}: {self.message}"


class VerificationFailed(ReleaseError):
    """A release directory failed verification; `.failures` lists every finding."""

    def __init__(self, failures: list[Failure], *, what: str = "release") -> None:
        self.failures = list(failures)
        lines = "\n".join(f"  - {f}" for f in self.failures[:20])
        more = len(self.failures) - 20
        tail = f"\n  ... and {more} more" if more > 0 else ""
        super().__init__(f"{what} failed verification ({len(self.failures)} failures):\n{lines}{tail}")


class PublishRefused(ReleaseError):
    """Publishing would overwrite something already published, or the input is not publishable."""

    def __init__(self, message: str, *, key: str = "") -> None:
        self.key = key
        super().__init__(message)


class ImmutableRelease(ReleaseError):
    """An edit or transition was attempted on a published manifest, or an illegal transition."""


class StoreError(ReleaseError):
    """A store could not complete an operation (bad key, missing object, I/O)."""


class ApprovalRefused(ReleaseError):
    """The approver is not on the allowed list, or the approval does not bind the release."""

    def __init__(self, message: str, *, approver: str = "", allowed: tuple[str, ...] = ()) -> None:
        self.approver = approver
        self.allowed = tuple(allowed)
        super().__init__(message)


class TrustFileError(ReleaseError):
    """The user's trust file is unreadable or malformed; names the file and the key in it."""

    def __init__(self, file: str, key_path: str, message: str) -> None:
        self.file, self.key_path, self.message = file, key_path, message
        super().__init__(f"{file}: {key_path or '<root>'}: {message}")
