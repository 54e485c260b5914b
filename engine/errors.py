"""Typed errors of the engine: each carries the numbers a caller needs to act."""
from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class ModelLoadError(EngineError):
    """A model directory is missing a file or holds something the engine cannot load."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class AdmissionError(EngineError):
    """A request can never fit in the KV pool, however long it waits."""

    def __init__(self, needed_blocks: int, total_blocks: int, block_size: int, tokens: int):
        super().__init__(
            f"request needs {needed_blocks} KV blocks ({tokens} tokens at {block_size} per block) "
            f"but the pool holds only {total_blocks} blocks in all")
        self.needed_blocks = needed_blocks
        self.total_blocks = total_blocks
        self.block_size = block_size
        self.tokens = tokens


class QueueFull(EngineError):
    """The pending queue holds max_pending requests already."""

    def __init__(self, max_pending: int):
        super().__init__(f"pending queue is full ({max_pending} requests waiting)")
        self.max_pending = max_pending


class PendingTimeout(EngineError):
    """A request waited in the pending queue longer than pending_timeout_s."""

    def __init__(self, waited_s: float, limit_s: float):
        super().__init__(f"request waited {waited_s:.2f}s for admission (limit {limit_s:.2f}s)")
        self.waited_s = waited_s
        self.limit_s = limit_s


class SessionError(EngineError):
    """A session key is unknown, busy, or its state does not match this engine."""


class RequestFailed(EngineError):
    """One request's processing raised inside an engine step; only that request fails, the
    others in its batch go on. `cause` is the original exception."""

    def __init__(self, request_id: int, where: str, cause: BaseException):
        super().__init__(f"request {request_id} failed during {where}: {type(cause).__name__}: {cause}")
        self.request_id = request_id
        self.where = where
        self.cause = cause


class DecodeKernelFailed(EngineError):
    """A grid barrier of the persistent batch-1 decode kernel timed out: its programs were not all
    resident on the GPU at once (another process's kernels holding SMs, say), so the tokens of
    that step and any after it are wrong. The flag stays set: every later step fails the same way
    until the engine restarts."""

    def __init__(self):
        super().__init__("the persistent batch-1 decode kernel's grid barrier timed out (its programs were not "
                         "all resident on the GPU), so its tokens are wrong; restart the engine with "
                         "ENGINE_PERSISTENT_DECODE=0 to decode with the layered step")
