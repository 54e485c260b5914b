"""Stored responses for previous_response_id chaining, bounded by count and bytes.

Each entry keeps the whole conversation (every input item up to this turn and its output),
so deleting a parent never breaks a descendant. Each entry belongs to the tenant that made it
(engine.server.tenancy): to any other tenant it does not exist.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StoredResponse:
    response: dict[str, Any]            # the Response object as returned to the client
    input_items: list[dict[str, Any]]   # the whole conversation's input items, with ids
    conversation: list[dict[str, Any]] = field(default_factory=list)  # messages incl. outputs
    owner: str = ""                     # the tenant that made it
    size: int = 0


class ResponseStore:
    def __init__(self, max_responses: int, max_bytes: int):
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evicted = 0

    def put(self, rid: str, entry: StoredResponse) -> None:
        entry.size = len(json.dumps([entry.response, entry.input_items, entry.conversation]))
        with self._lock:
            old = self._items.pop(rid, None)
            if old is not None:
                self._bytes -= old.size
            if self.max_responses == 0 or entry.size > self.max_bytes:
                return
            self._items[rid] = entry
            self._bytes += entry.size
            while len(self._items) > self.max_responses or self._bytes > self.max_bytes:
                _, gone = self._items.popitem(last=False)
                self._bytes -= gone.size
                self.evicted += 1

    def get(self, rid: str, owner: str) -> StoredResponse | None:
        """The entry when `owner` made it; None when it is unknown or another tenant's."""
        with self._lock:
            entry = self._items.get(rid)
            return entry if entry is not None and entry.owner == owner else None

    def delete(self, rid: str, owner: str) -> bool:
        with self._lock:
            entry = self._items.get(rid)
            if entry is None or entry.owner != owner:
                return False
            del self._items[rid]
            self._bytes -= entry.size
            return True

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"responses": len(self._items), "bytes": self._bytes, "evicted": self.evicted}
