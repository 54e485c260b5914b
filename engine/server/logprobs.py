"""Log-probabilities in the two OpenAI shapes: chat's per-token objects and the legacy
completions' parallel lists. The values are the engine's (engine.runtime.sampling): the
log-softmax of the logits the sampler saw, after any penalties and before temperature and
top_p, i.e. the model's own distribution, as OpenAI reports it."""
from __future__ import annotations

from typing import Any

from engine.runtime.sampling import TokenLogprob


class TokenText:
    """Each token's own text (a token that is part of a UTF-8 sequence decodes to U+FFFD
    alone, as the `tokenizers` library decodes it), cached per id."""

    def __init__(self, tokenizer: Any):
        self.tok, self.cache = tokenizer, {}

    def __call__(self, tid: int) -> str:
        if tid not in self.cache:
            self.cache[tid] = self.tok.decode([tid])
        return self.cache[tid]


def chat_content(entries: list[TokenLogprob], text: TokenText) -> list[dict]:
    """`choices[].logprobs.content`: {token, logprob, bytes, top_logprobs: [...]} per token."""
    def one(tid: int, lp: float) -> dict:
        s = text(tid)
        return {"token": s, "logprob": lp, "bytes": list(s.encode("utf-8"))}
    return [{**one(e.token_id, e.logprob), "top_logprobs": [one(t, v) for t, v in e.top]}
            for e in entries]


class LegacyLogprobs:
    """`choices[].logprobs` of /v1/completions: tokens, token_logprobs, top_logprobs (a
    token -> logprob map each) and text_offset, counted on across stream chunks."""

    def __init__(self, text: TokenText, start_offset: int = 0):
        self.text, self.offset = text, start_offset

    def __call__(self, entries: list[TokenLogprob]) -> dict:
        out: dict[str, list] = {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                "text_offset": []}
        for e in entries:
            s = self.text(e.token_id)
            out["tokens"].append(s)
            out["token_logprobs"].append(e.logprob)
            top: dict[str, float] = {}
            for t, v in e.top:
                top.setdefault(self.text(t), v)   # two ids may share a text: the likelier wins
            out["top_logprobs"].append(top)
            out["text_offset"].append(self.offset)
            self.offset += len(s)
        return out
