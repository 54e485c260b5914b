"""Detecting a silent SSH peer (a host frozen or a network gone quiet without closing the TCP
connection): after `interval` seconds without traffic, ask the server for a reply; no reply
within `interval` more seconds means the host is lost. One probe per transport at a time,
shared by every command running on it (paramiko's global requests share one completion event,
so concurrent probes would hide each other's replies)."""
from __future__ import annotations

import threading
import time

import paramiko


class Liveness:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._transport: paramiko.Transport | None = None
        self._last_ok = time.monotonic()
        self._pending_since: float | None = None

    def heard(self) -> None:
        """Traffic arrived: the peer is alive now."""
        self._last_ok = time.monotonic()

    def silent_too_long(self, transport: paramiko.Transport) -> bool:
        """Call from a waiting loop; True once a probe went unanswered for `interval` seconds."""
        now = time.monotonic()
        with self._lock:
            if self._transport is not transport:  # a new connection starts with a clean slate
                self._transport, self._pending_since, self._last_ok = transport, None, now
            if self._pending_since is not None:
                return now - self._pending_since > self.interval
            if now - self._last_ok > self.interval:
                self._pending_since = now
                threading.Thread(target=self._probe, args=(transport,), daemon=True).start()
        return False

    def _probe(self, transport: paramiko.Transport) -> None:
        try:
            # Any reply, even a refusal of this unknown request, proves the peer is there.
            transport.global_request("keepalive@openssh.com", wait=True)
        except Exception:  # the transport broke: the waiting loop sees it inactive
            return
        with self._lock:
            if self._transport is transport and transport.is_active():
                self._pending_since, self._last_ok = None, time.monotonic()
