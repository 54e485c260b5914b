"""POST /v1/chat/completions and GET /v1/models."""
from __future__ import annotations

import time
import uuid
from typing import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from engine.server.api_models import ChatCompletionRequest, content_text, stop_list
from engine.server.chat_format import render_chat
from engine.server.disconnect import run_unless_disconnected
from engine.server.errors import APIError
from engine.server.generation import Generation, Outcome
from engine.server.logprobs import TokenText, chat_content
from engine.server.request_body import (check_model, check_response_format, parse_body,
                                        sampling_params)
from engine.server.sse import DONE, event_stream, sse_data
from engine.server.tenancy import request_tenant, session_key

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request):
    st = request.app.state.server
    return {"object": "list", "data": [{"id": st.model_name, "object": "model",
                                        "created": int(st.started_at), "owned_by": "assay"}]}


def _usage(o: Outcome) -> dict:
    return {"prompt_tokens": o.prompt_tokens, "completion_tokens": o.completion_tokens,
            "total_tokens": o.prompt_tokens + o.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": o.cached_tokens}}


def run_to_end(gen: Generation) -> tuple[str, Outcome]:
    try:
        for _ in gen.deltas():
            pass
        return gen.text(), gen.finish()
    except BaseException:
        gen.abort("server_error")
        raise


@router.post("/v1/chat/completions")
async def chat_completions(request: Request):
    arrived = time.time()
    st = request.app.state.server
    req = await parse_body(request, ChatCompletionRequest, st.profile["max_request_bytes"])
    check_model(st, req.model)
    check_response_format(req.response_format)
    if req.top_logprobs is not None and not req.logprobs:
        raise APIError("invalid_request", "top_logprobs needs logprobs: true",
                       "top_logprobs")
    n_top = (req.top_logprobs or 0) if req.logprobs else None
    messages = [{"role": m.role, "content": content_text(m.content)} for m in req.messages]
    prompt = render_chat(st.tokenizer, st.profile["model"]["path"], messages)
    ids = st.tokenizer.encode(prompt)
    max_tokens = req.max_completion_tokens or req.max_tokens
    max_param = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
    params = sampling_params(st, len(ids), max_tokens, req.temperature, req.top_p, req.seed,
                             max_param, presence_penalty=req.presence_penalty,
                             frequency_penalty=req.frequency_penalty,
                             repetition_penalty=req.repetition_penalty, logprobs=n_top)
    token_text = TokenText(st.tokenizer)

    def logprobs() -> dict | None:
        """The logprobs of the tokens read since the last call (None when not asked)."""
        if n_top is None:
            return None
        return {"content": chat_content(gen.take_logprobs(), token_text), "refusal": None}

    gen = Generation(st, route="/v1/chat/completions", prompt_ids=ids, params=params,
                     session=session_key(request_tenant(request), req.prompt_cache_key),
                     arrived=arrived, prompt_text=prompt, stop=stop_list(req.stop))
    await run_unless_disconnected(request, gen, gen.open)
    cid, created = "chatcmpl-" + uuid.uuid4().hex[:24], int(arrived)
    if not req.stream:
        text, out = await run_unless_disconnected(request, gen, run_to_end, gen)
        return JSONResponse({
            "id": cid, "object": "chat.completion", "created": created, "model": st.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": logprobs(), "finish_reason": out.finish_reason}],
            "usage": _usage(out)})
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    base = {"id": cid, "object": "chat.completion.chunk", "created": created,
            "model": st.model_name}

    def chunk(delta: dict, finish: str | None, lp: dict | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": lp,
                                     "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return sse_data(body)

    def events() -> Iterator[bytes]:
        yield chunk({"role": "assistant", "content": ""}, None)
        for d in gen.deltas():
            yield chunk({"content": d}, None, logprobs())
        out = gen.finish()
        rest = logprobs()
        yield chunk({}, out.finish_reason, rest if rest and rest["content"] else None)
        if include_usage:
            yield sse_data({**base, "choices": [], "usage": _usage(out)})
        yield DONE

    return event_stream(gen, events(), lambda err: sse_data(err) + DONE)
