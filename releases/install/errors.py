"""The installer's one error type: what was wrong and where, printed as one line without a traceback."""
from __future__ import annotations

from releases.errors import ReleaseError


class InstallError(ReleaseError):
    """A refused or failed installer command; `where` names the file, URL, port or path at fault."""

    def __init__(self, message: str, *, where: str = "") -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)
