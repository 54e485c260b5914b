"""Typed API errors in the OpenAI error shape, with stable codes."""
from __future__ import annotations

from typing import Any

# code -> (HTTP status, error type). The codes are part of the public contract (docs/API.md).
CODES: dict[str, tuple[int, str]] = {
    "unknown_parameter": (400, "invalid_request_error"),
    "invalid_request": (400, "invalid_request_error"),
    "context_length_exceeded": (400, "invalid_request_error"),
    "invalid_api_key": (401, "authentication_error"),
    "not_found": (404, "not_found_error"),
    "model_not_found": (404, "not_found_error"),
    "response_not_found": (404, "not_found_error"),
    "previous_response_not_found": (404, "not_found_error"),
    "session_not_found": (404, "not_found_error"),
    "method_not_allowed": (405, "invalid_request_error"),
    "session_busy": (409, "conflict_error"),
    "checkpoints_disabled": (409, "conflict_error"),
    "checkpoint_quota_exceeded": (409, "conflict_error"),
    "request_too_large": (413, "invalid_request_error"),
    "server_overloaded": (429, "rate_limit_error"),
    "internal_error": (500, "server_error"),
    "request_queue_timeout": (503, "server_error"),
    "server_shutting_down": (503, "server_error"),
}


class APIError(Exception):
    """An error a client sees: HTTP status plus the OpenAI error body."""

    def __init__(self, code: str, message: str, param: str | None = None):
        if code not in CODES:
            raise ValueError(f"unknown API error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.status, self.type = CODES[code]

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.param)


def error_body(code: str, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": CODES[code][1], "param": param, "code": code}}
