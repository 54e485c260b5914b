"""Typed errors of the judged gates: what went wrong and where, never a bare traceback."""

from __future__ import annotations


class JudgedError(Exception):
    """Base of every error gates.judged raises."""


class SettingsError(JudgedError):
    """A lane's gate settings are malformed: names the key path and what was expected."""

    def __init__(self, where: str, message: str):
        self.where, self.message = where, message
        super().__init__(f"gate settings {where}: {message}")


class CorpusError(JudgedError):
    """A committed corpus is missing, malformed or not the bytes its generator writes."""

    def __init__(self, corpus: str, message: str):
        self.corpus, self.message = corpus, message
        super().__init__(f"corpus {corpus}: {message}")


class EndpointUnavailable(JudgedError):
    """An engine server could not be reached or refused every request (environment, not verdict)."""

    def __init__(self, role: str, url: str, message: str):
        self.role, self.url, self.message = role, url, message
        super().__init__(f"{role} server {url}: {message}")


class IdentityError(JudgedError):
    """An incumbent identity or candidate ref given by the caller is malformed."""

    def __init__(self, what: str, message: str):
        self.what, self.message = what, message
        super().__init__(f"{what}: {message}")
