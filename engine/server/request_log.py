"""The request log: one JSON object per line; digests of prompts and outputs, never text."""
from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

EVENTS = ("server_start", "request_start", "request_done", "request_rejected", "request_error",
          "parameters_ignored", "shutdown")


def text_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def tokens_digest(ids: list[int]) -> str:
    return "sha256:" + hashlib.sha256(",".join(map(str, ids)).encode("ascii")).hexdigest()


class RequestLog:
    """Append-only JSONL; a None path keeps records in memory only (tests, no log configured)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._fh = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        if event not in EVENTS:
            raise ValueError(f"unknown request-log event {event!r}")
        record = {"event": event, "ts": round(time.time(), 6), **fields}
        line = json.dumps(record, separators=(",", ":"), sort_keys=True, allow_nan=False)
        with self._lock:
            if self._fh is not None:
                self._fh.write(line + "\n")
                self._fh.flush()
        return record

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def read_log(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln]
