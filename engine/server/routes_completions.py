"""POST /v1/completions: the legacy text completion, prompt as text or as token ids."""
from __future__ import annotations

import time
import uuid
from typing import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from engine.server.api_models import CompletionRequest, stop_list
from engine.server.disconnect import run_unless_disconnected
from engine.server.errors import APIError
from engine.server.generation import Generation, Outcome
from engine.server.logprobs import LegacyLogprobs, TokenText
from engine.server.request_body import (check_model, check_response_format, parse_body,
                                        sampling_params)
from engine.server.routes_chat import run_to_end
from engine.server.sse import DONE, event_stream, sse_data
from engine.server.tenancy import request_tenant, session_key

router = APIRouter()
DEFAULT_MAX_TOKENS = 16   # what OpenAI's completions API does when max_tokens is left out


def prompt_ids(st, prompt) -> tuple[list[int], str]:
    """The prompt as token ids, and the text it stands for (for the log digest)."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]    # a batch of one: [text] or [[ids]]
    if isinstance(prompt, str):
        ids = st.tokenizer.encode(prompt)
        text = prompt
    elif all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        vocab = st.llm.config.vocab_size
        bad = next((i for i, t in enumerate(prompt) if not 0 <= t < vocab), None)
        if bad is not None:
            raise APIError("invalid_request", f"prompt[{bad}] = {prompt[bad]} is not a token id "
                           f"of this model (0 to {vocab - 1})", f"prompt[{bad}]")
        ids, text = list(prompt), ",".join(map(str, prompt))
    else:
        raise APIError("invalid_request", "prompt must be a string, a list of token ids, or a "
                       "list holding one of those (one prompt per request)", "prompt")
    if not ids:
        raise APIError("invalid_request", "prompt is empty: it must hold at least one token",
                       "prompt")
    return ids, text


def _usage(o: Outcome) -> dict:
    return {"prompt_tokens": o.prompt_tokens, "completion_tokens": o.completion_tokens,
            "total_tokens": o.prompt_tokens + o.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": o.cached_tokens}}


@router.post("/v1/completions")
async def completions(request: Request):
    arrived = time.time()
    st = request.app.state.server
    req = await parse_body(request, CompletionRequest, st.profile["max_request_bytes"])
    check_model(st, req.model)
    check_response_format(req.response_format)
    ids, text = prompt_ids(st, req.prompt)
    max_tokens = req.max_tokens
    if max_tokens is None:  # OpenAI's default, cut to the context that is left
        max_tokens = max(min(DEFAULT_MAX_TOKENS, st.profile["max_context"] - len(ids)), 1)
    params = sampling_params(st, len(ids), max_tokens, req.temperature, req.top_p, req.seed,
                             "max_tokens", presence_penalty=req.presence_penalty,
                             frequency_penalty=req.frequency_penalty,
                             repetition_penalty=req.repetition_penalty, logprobs=req.logprobs)
    legacy = LegacyLogprobs(TokenText(st.tokenizer))

    def logprobs() -> dict | None:
        """The logprobs of the tokens read since the last call (None when not asked)."""
        return None if req.logprobs is None else legacy(gen.take_logprobs())

    gen = Generation(st, route="/v1/completions", prompt_ids=ids, params=params,
                     session=session_key(request_tenant(request), req.prompt_cache_key),
                     arrived=arrived, prompt_text=text, stop=stop_list(req.stop))
    await run_unless_disconnected(request, gen, gen.open)
    cid, created = "cmpl-" + uuid.uuid4().hex[:24], int(arrived)
    base = {"id": cid, "object": "text_completion", "created": created, "model": st.model_name}
    if not req.stream:
        out_text, out = await run_unless_disconnected(request, gen, run_to_end, gen)
        return JSONResponse({**base, "choices": [{"index": 0, "text": out_text,
                                                  "logprobs": logprobs(),
                                                  "finish_reason": out.finish_reason}],
                             "usage": _usage(out)})
    include_usage = bool(req.stream_options and req.stream_options.include_usage)

    def chunk(delta: str, finish: str | None, lp: dict | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "text": delta, "logprobs": lp,
                                     "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return sse_data(body)

    def events() -> Iterator[bytes]:
        for d in gen.deltas():
            yield chunk(d, None, logprobs())
        out = gen.finish()
        rest = logprobs()
        yield chunk("", out.finish_reason, rest if rest and rest["tokens"] else None)
        if include_usage:
            yield sse_data({**base, "choices": [], "usage": _usage(out)})
        yield DONE

    return event_stream(gen, events(), lambda err: sse_data(err) + DONE)
