"""Sampling parameters and token selection: greedy argmax, or seeded temperature / top-p,
after optional repetition penalties; optionally the log-probabilities of each choice.

Each request owns a CPU torch.Generator seeded from its seed, and its logits row is sampled
on the CPU in float32, so a request's tokens never depend on what else is in the batch.

Tiny settings are safe here, not only at the server: a temperature whose float32 value is
below the smallest normal float32 (finfo.tiny, ~1.2e-38; zero included) samples greedily,
and a top_p of any positive size always keeps the most likely token (the smallest nucleus is
that one token), so neither can divide by zero, overflow to inf/NaN or empty the nucleus.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


MAX_LOGPROBS = 20
_TINY = float(torch.finfo(torch.float32).tiny)


@dataclass
class SamplingParams:
    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False        # benchmarks: generate exactly max_new_tokens
    # OpenAI semantics, over the tokens generated so far: logit -= frequency * count +
    # presence * (count > 0). repetition_penalty (vLLM/transformers semantics, over prompt and
    # output tokens): a seen token's positive logit is divided by it, a negative one multiplied.
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    # None: no log-probabilities. n >= 0: the chosen token's and the n most likely ones'.
    logprobs: int | None = None

    def __post_init__(self):
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be an int >= 1, got {self.max_new_tokens!r}")
        if not self.temperature >= 0.0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature!r}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p!r}")
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2.0 <= getattr(self, name) <= 2.0:
                raise ValueError(f"SamplingParams.{name} must be in [-2, 2], got {getattr(self, name)!r}")
        if not 0.0 < self.repetition_penalty <= 2.0:
            raise ValueError(f"SamplingParams.repetition_penalty must be in (0, 2], got {self.repetition_penalty!r}")
        if self.logprobs is not None and not (isinstance(self.logprobs, int) and 0 <= self.logprobs <= MAX_LOGPROBS):
            raise ValueError(f"SamplingParams.logprobs must be None or an int 0..{MAX_LOGPROBS}, got {self.logprobs!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature < _TINY

    @property
    def penalised(self) -> bool:
        return (self.presence_penalty != 0.0 or self.frequency_penalty != 0.0
                or self.repetition_penalty != 1.0)

    @property
    def plain(self) -> bool:
        """Greedy on the raw logits with nothing to record: the batched argmax, pipelined
        decode and n-gram speculation may pick its tokens."""
        return self.greedy and not self.penalised and self.logprobs is None


@dataclass
class TokenLogprob:
    """The log-probability of a chosen token, and the top alternatives (most likely first)."""
    token_id: int
    logprob: float
    top: list[tuple[int, float]]


def penalise(logits: torch.Tensor, params: SamplingParams, prompt_ids: list[int],
             output_ids: list[int]) -> torch.Tensor:
    """A float32 CPU copy of a [V] logits row with the request's penalties applied."""
    row = logits.detach().float().cpu().clone()
    if params.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(prompt_ids) | set(output_ids)), dtype=torch.int64)
        if seen.numel():
            v = row[seen]
            row[seen] = torch.where(v > 0, v / params.repetition_penalty, v * params.repetition_penalty)
    if (params.presence_penalty or params.frequency_penalty) and output_ids:
        counts = torch.bincount(torch.tensor(output_ids, dtype=torch.int64), minlength=row.numel()).float()
        row -= counts * params.frequency_penalty + (counts > 0).float() * params.presence_penalty
    return row


def token_logprob(row: torch.Tensor, token: int, n: int) -> TokenLogprob:
    """log_softmax of the row (the logits sampling saw, before temperature) at token, and
    the n most likely tokens."""
    lp = torch.log_softmax(row.detach().float().cpu(), dim=-1)
    top = []
    if n:
        vals, ids = torch.topk(lp, n)
        top = [(int(i), float(v)) for i, v in zip(ids.tolist(), vals.tolist())]
    return TokenLogprob(int(token), float(lp[token]), top)


def make_generator(params: SamplingParams) -> torch.Generator | None:
    if params.greedy:
        return None
    g = torch.Generator(device="cpu")
    g.manual_seed(params.seed if params.seed is not None else int(torch.randint(0, 2**62, ()).item()))
    return g


def sample_row(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator | None) -> int:
    """One token id from a [V] logits row."""
    if params.greedy:
        return int(torch.argmax(logits).item())
    row = logits.detach().float().cpu()
    scaled = row / params.temperature
    if not torch.isfinite(scaled).all():
        # A tiny (normal) temperature overflowed a logit to inf: shift by the row's max first,
        # so the top token scales to 0 and the others to large negatives (or -inf).
        scaled = (row - row.max()) / params.temperature
    probs = torch.softmax(scaled, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < params.top_p
        keep[0] = True   # the smallest nucleus is the top token, whatever top_p rounds to
        sorted_p = torch.where(keep, sorted_p, torch.zeros_like(sorted_p))
        return int(order[torch.multinomial(sorted_p, 1, generator=gen)].item())
    return int(torch.multinomial(probs, 1, generator=gen).item())


def choose(logits: torch.Tensor, params: SamplingParams, gen, prompt_ids: list[int],
           output_ids: list[int]) -> tuple[int, TokenLogprob | None]:
    """One token from a [V] row after the request's penalties, with its log-probability
    record when the request asked for one."""
    row = penalise(logits, params, prompt_ids, output_ids) if params.penalised else logits
    tok = sample_row(row, params, gen)
    return tok, (token_logprob(row, tok, params.logprobs) if params.logprobs is not None else None)


def _argmax_chunks(vocab: int) -> int:
    """The most chunks (at most 1024, each at least 128 wide) that divide vocab evenly; 1 if none."""
    for c in range(min(1024, vocab // 128), 31, -1):
        if vocab % c == 0:
            return c
    return 1


def argmax_rows(logits: torch.Tensor, chunks: int | None = None) -> torch.Tensor:
    """torch.argmax(logits, dim=-1) for [B, V] logits, in two stages on CUDA.

    A single row's argmax over a 128K vocabulary is one long reduction that a GPU runs on
    one block, slow next to a decode step (figures in docs/perf/engine.md). Here each of up to 1024 equal chunks
    finds its max and first index of it, then the first chunk holding the row's max wins:
    the first index of the row's max, as torch.argmax returns (NaN counts as the max in both).
    chunks (tests) forces a chunk count that divides V; by default the CPU takes one stage."""
    b, v = logits.shape
    c = chunks if chunks is not None else _argmax_chunks(v) if logits.is_cuda else 1
    if c == 1:
        return torch.argmax(logits, dim=-1)
    vals, idx = logits.reshape(b, c, v // c).max(dim=-1)
    best = torch.argmax(vals, dim=-1, keepdim=True)
    return (best * (v // c) + idx.gather(1, best)).squeeze(1)
