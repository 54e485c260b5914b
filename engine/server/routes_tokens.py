"""The tokenizer over HTTP, and the engine's version: /tokenize, /detokenize, /version
(vLLM's shapes, so that tools written for it work)."""
from __future__ import annotations

from fastapi import APIRouter, Request

import engine
from engine.server.api_models import DetokenizeRequest, TokenizeRequest, content_text
from engine.server.chat_format import render_chat
from engine.server.errors import APIError
from engine.server.request_body import check_model, parse_body

router = APIRouter()


@router.get("/version")
async def version():
    return {"version": engine.__version__}


@router.post("/tokenize")
async def tokenize(request: Request):
    st = request.app.state.server
    req = await parse_body(request, TokenizeRequest, st.profile["max_request_bytes"])
    if req.model is not None:
        check_model(st, req.model)
    if (req.prompt is None) == (req.messages is None):
        raise APIError("invalid_request", "send exactly one of 'prompt' (text) and 'messages' "
                       "(a chat, rendered with the model's chat template)", "prompt")
    if req.messages is not None:
        messages = [{"role": m.role, "content": content_text(m.content)} for m in req.messages]
        text = render_chat(st.tokenizer, st.profile["model"]["path"], messages,
                           add_generation_prompt=req.add_generation_prompt)
    else:
        text = req.prompt
    ids = st.tokenizer.encode(text)
    return {"count": len(ids), "max_model_len": st.profile["max_context"], "tokens": ids}


@router.post("/detokenize")
async def detokenize(request: Request):
    st = request.app.state.server
    req = await parse_body(request, DetokenizeRequest, st.profile["max_request_bytes"])
    if req.model is not None:
        check_model(st, req.model)
    vocab = st.llm.config.vocab_size
    bad = next((i for i, t in enumerate(req.tokens) if not 0 <= t < vocab), None)
    if bad is not None:
        raise APIError("invalid_request", f"tokens[{bad}] = {req.tokens[bad]} is not a token "
                       f"id of this model (0 to {vocab - 1})", f"tokens[{bad}]")
    return {"prompt": st.tokenizer.decode(req.tokens)}
