"""One request's state inside the engine: tokens, KV blocks, progress, timing, output channel."""
from __future__ import annotations

import enum
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field

from engine.runtime.sampling import SamplingParams, make_generator

_ids = itertools.count()


class Status(enum.Enum):
    PENDING = "pending"
    PREFILL = "prefill"
    DECODE = "decode"
    FINISHED = "finished"


@dataclass
class GenerationResult:
    token_ids: list[int]
    finish_reason: str                 # "stop" | "length" | "cancelled"
    prompt_tokens: int
    cached_tokens: int
    stats: dict = field(default_factory=dict)
    logprobs: list = field(default_factory=list)   # sampling.TokenLogprob per token, if asked


class Sequence:
    def __init__(self, prompt_ids: list[int], params: SamplingParams, session: str | None, draft_k: int):
        self.id = next(_ids)
        self.prompt_len = len(prompt_ids)
        self.tokens: list[int] = list(prompt_ids)
        self.params = params
        self.session = session
        self.generator = make_generator(params)
        self.status = Status.PENDING
        self.blocks: list[int] = []
        self.kv_len = 0                  # tokens whose K/V are in the cache
        self.cached_tokens = 0           # of those, how many came from the session cache
        self.finish_reason: str | None = None
        self.error: BaseException | None = None
        self.cancel_requested = threading.Event()
        self.ngram = None                # spec_ngram.NgramIndex, made on first draft
        self.spec_attempted = [0] * draft_k
        self.spec_accepted = [0] * draft_k
        self.t_submit = time.monotonic()
        self.t_admit = self.t_first = self.t_prefill_done = self.t_end = None
        self.logprobs: list = []         # sampling.TokenLogprob per output token, when asked for
        self.out: queue.Queue = queue.Queue()     # token ids, then None when finished
        self.done = threading.Event()

    @property
    def output(self) -> list[int]:
        return self.tokens[self.prompt_len:]

    @property
    def num_generated(self) -> int:
        return len(self.tokens) - self.prompt_len

    @property
    def reserved_tokens(self) -> int:
        return self.prompt_len + self.params.max_new_tokens

    def emit(self, token: int, logprob=None) -> None:
        if self.t_first is None:
            self.t_first = time.monotonic()
        if logprob is not None:          # recorded before the token is visible to the reader
            self.logprobs.append(logprob)
        self.tokens.append(token)
        self.out.put(token)

    def finish(self, reason: str | None, error: BaseException | None = None) -> None:
        self.status = Status.FINISHED
        self.finish_reason, self.error = reason, error
        self.t_end = time.monotonic()
        self.out.put(None)
        self.done.set()

    def stats(self) -> dict:
        end = self.t_end or time.monotonic()
        admit = self.t_admit or end
        prefill_end = self.t_prefill_done or end
        prefilled = self.prompt_len - self.cached_tokens
        decode_n = max(self.num_generated - 1, 0)
        return {
            "queue_s": admit - self.t_submit,
            "ttft_s": (self.t_first - self.t_submit) if self.t_first else None,
            "prefill_tok_s": prefilled / (prefill_end - admit) if prefill_end > admit else 0.0,
            "decode_tok_s": decode_n / (end - prefill_end) if decode_n and end > prefill_end else 0.0,
            "spec": {"attempted": list(self.spec_attempted), "accepted": list(self.spec_accepted)},
        }

    def result(self) -> GenerationResult:
        return GenerationResult(self.output, self.finish_reason or "cancelled", self.prompt_len,
                                self.cached_tokens, self.stats(), list(self.logprobs))
