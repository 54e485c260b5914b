"""Everything one server process holds: engine, stores, log, metrics, counters."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engine.server.auth import Authenticator
from engine.server.checkpoints import CheckpointStore
from engine.server.errors import APIError
from engine.server.metrics import ServerMetrics
from engine.server.profile import Profile
from engine.server.request_log import RequestLog
from engine.server.response_store import ResponseStore


@dataclass
class Counters:
    completed: int = 0
    cancelled: int = 0
    errors: int = 0
    rejected: int = 0
    refused_draining: int = 0
    drained_complete: int = 0     # requests in flight at the stop signal that then completed
    checkpoints_saved: int = 0
    checkpoints_restored: int = 0
    checkpoints_refused: int = 0


@dataclass
class ServerState:
    profile: Profile
    llm: Any                                   # engine.llm.LLM
    auth: Authenticator
    responses: ResponseStore
    log: RequestLog
    metrics: ServerMetrics
    identity: dict[str, Any]
    admission: dict[str, Any]
    checkpoints: CheckpointStore | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    counters: Counters = field(default_factory=Counters)
    draining: bool = False
    inflight: int = 0
    _busy: set[str] = field(default_factory=set)
    _dirty: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def model_name(self) -> str:
        return self.profile["model"]["name"]

    @property
    def tokenizer(self) -> Any:
        return self.llm.tokenizer

    def begin(self, session: str | None) -> None:
        """Admit one request into the server (not yet the engine); claims its session."""
        with self.lock:
            if self.draining:
                self.counters.refused_draining += 1
                raise APIError("server_shutting_down", "the server is shutting down")
            if session is not None:
                if session in self._busy:
                    raise APIError("session_busy", "another request is using this "
                                   "prompt_cache_key; retry when it finishes", "prompt_cache_key")
                self._busy.add(session)
            self.inflight += 1

    def end(self, session: str | None, outcome: str, *, dirty: bool = False) -> None:
        with self.lock:
            self.inflight -= 1
            if session is not None:
                self._busy.discard(session)
                if dirty:
                    self._dirty.add(session)
            if outcome == "completed":
                self.counters.completed += 1
                if self.draining:
                    self.counters.drained_complete += 1
            elif outcome == "cancelled":
                self.counters.cancelled += 1
            elif outcome == "error":
                self.counters.errors += 1

    def session_busy(self, session: str) -> bool:
        with self.lock:
            return session in self._busy

    def take_dirty(self) -> list[str]:
        with self.lock:
            out, self._dirty = sorted(self._dirty), set()
            return out

    def mark_clean(self, session: str) -> None:
        with self.lock:
            self._dirty.discard(session)
