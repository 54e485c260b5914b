"""RequestHandle: the caller's side of one submitted request."""
from __future__ import annotations

from typing import Callable, Iterator

from engine.runtime.sequence import GenerationResult, Sequence


class RequestHandle:
    def __init__(self, seq: Sequence, wake: Callable[[], None]):
        self._seq, self._wake = seq, wake

    @property
    def id(self) -> int:
        return self._seq.id

    def stream(self) -> Iterator[int]:
        """Token ids as they are produced; raises the request's error (e.g. PendingTimeout)."""
        while True:
            tok = self._seq.out.get()
            if tok is None:
                break
            yield tok
        if self._seq.error is not None:
            raise self._seq.error

    def result(self, timeout: float | None = None) -> GenerationResult:
        if not self._seq.done.wait(timeout):
            raise TimeoutError(f"request {self.id} did not finish within {timeout}s")
        if self._seq.error is not None:
            raise self._seq.error
        return self._seq.result()

    @property
    def logprobs(self) -> list:
        """sampling.TokenLogprob per output token so far (when the request asked for them);
        the i-th is in place before the i-th token comes out of stream()."""
        return self._seq.logprobs

    def cancel(self) -> None:
        """Ask the engine to stop this request; its result then says finish_reason='cancelled'."""
        self._seq.cancel_requested.set()
        self._wake()

    @property
    def done(self) -> bool:
        return self._seq.done.is_set()
