"""The Responses API: POST /v1/responses, GET/DELETE /v1/responses/{id}, input_items."""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from engine.server.api_models import ResponsesRequest, content_text
from engine.server.chat_format import render_chat
from engine.server.disconnect import run_unless_disconnected
from engine.server.errors import APIError
from engine.server.generation import Generation, Outcome
from engine.server.request_body import check_model, parse_body, sampling_params
from engine.server.response_store import StoredResponse
from engine.server.routes_chat import run_to_end
from engine.server.sse import ResponsesEventWriter, event_stream
from engine.server.tenancy import request_tenant, session_key

router = APIRouter()


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _input_items(req: ResponsesRequest) -> list[dict[str, Any]]:
    if isinstance(req.input, str):
        msgs = [("user", req.input)]
    else:
        msgs = [(m.role, content_text(m.content)) for m in req.input]
    return [{"type": "message", "id": _new_id("msg"), "role": role, "status": "completed",
             "content": [{"type": "input_text", "text": text}]} for role, text in msgs]


def _message_item(mid: str, text: str, status: str) -> dict[str, Any]:
    return {"type": "message", "id": mid, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _response_obj(rid: str, created: int, st, req: ResponsesRequest, status: str,
                  output: list, out: Outcome | None) -> dict[str, Any]:
    usage = None
    if out is not None:
        usage = {"input_tokens": out.prompt_tokens,
                 "input_tokens_details": {"cached_tokens": out.cached_tokens},
                 "output_tokens": out.completion_tokens,
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": out.prompt_tokens + out.completion_tokens}
    incomplete = ({"reason": "max_output_tokens"} if out is not None
                  and out.finish_reason == "length" else None)
    return {"id": rid, "object": "response", "created_at": created, "status": status,
            "model": st.model_name, "output": output, "error": None,
            "incomplete_details": incomplete, "instructions": req.instructions,
            "previous_response_id": req.previous_response_id,
            "max_output_tokens": req.max_output_tokens, "temperature": req.temperature,
            "top_p": req.top_p, "store": req.store, "metadata": req.metadata or {},
            "prompt_cache_key": req.prompt_cache_key, "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
            "truncation": "disabled", "usage": usage}


@router.post("/v1/responses")
async def create_response(request: Request):
    arrived = time.time()
    st = request.app.state.server
    req = await parse_body(request, ResponsesRequest, st.profile["max_request_bytes"])
    check_model(st, req.model)
    tenant = request_tenant(request)
    history: list[dict[str, Any]] = []
    prior_items: list[dict[str, Any]] = []
    if req.previous_response_id is not None:
        parent = st.responses.get(req.previous_response_id, tenant)
        if parent is None:
            raise APIError("previous_response_not_found", f"Previous response with id "
                           f"'{req.previous_response_id}' not found.", "previous_response_id")
        history = list(parent.conversation)
        prior_items = list(parent.input_items) + list(parent.response["output"])
    new_items = _input_items(req)
    convo = history + [{"role": it["role"], "content": it["content"][0]["text"]}
                       for it in new_items]
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    prompt = render_chat(st.tokenizer, st.profile["model"]["path"], system + convo)
    ids = st.tokenizer.encode(prompt)
    params = sampling_params(st, len(ids), req.max_output_tokens, req.temperature, req.top_p,
                             None, "max_output_tokens")
    gen = Generation(st, route="/v1/responses", prompt_ids=ids, params=params,
                     session=session_key(tenant, req.prompt_cache_key), arrived=arrived,
                     prompt_text=prompt)
    await run_unless_disconnected(request, gen, gen.open)
    rid, mid, created = _new_id("resp"), _new_id("msg"), int(arrived)

    def complete(text: str, out: Outcome) -> dict[str, Any]:
        status = "incomplete" if out.finish_reason == "length" else "completed"
        item = _message_item(mid, text, "completed" if status == "completed" else "incomplete")
        resp = _response_obj(rid, created, st, req, status, [item], out)
        if req.store and out.finish_reason != "cancelled":  # cancelled: its client left
            st.responses.put(rid, StoredResponse(
                response=resp, input_items=prior_items + new_items,
                conversation=convo + [{"role": "assistant", "content": text}], owner=tenant))
        return resp

    if not req.stream:
        text, out = await run_unless_disconnected(request, gen, run_to_end, gen)
        return JSONResponse(complete(text, out))

    ev = ResponsesEventWriter()

    def events() -> Iterator[bytes]:
        skeleton = _response_obj(rid, created, st, req, "in_progress", [], None)
        yield ev("response.created", response=skeleton)
        yield ev("response.in_progress", response=skeleton)
        yield ev("response.output_item.added", output_index=0,
                 item={**_message_item(mid, "", "in_progress"), "content": []})
        part = {"type": "output_text", "text": "", "annotations": []}
        yield ev("response.content_part.added", item_id=mid, output_index=0,
                 content_index=0, part=part)
        for d in gen.deltas():
            yield ev("response.output_text.delta", item_id=mid, output_index=0,
                     content_index=0, delta=d, logprobs=[])
        text = gen.text()
        out = gen.finish()
        resp = complete(text, out)
        yield ev("response.output_text.done", item_id=mid, output_index=0,
                 content_index=0, text=text, logprobs=[])
        yield ev("response.content_part.done", item_id=mid, output_index=0,
                 content_index=0, part={**part, "text": text})
        yield ev("response.output_item.done", output_index=0, item=resp["output"][0])
        yield ev("response.completed" if resp["status"] == "completed"
                 else "response.incomplete", response=resp)

    return event_stream(gen, events(), lambda err: ev("error", **err["error"]))


def _stored(request: Request, rid: str) -> StoredResponse:
    entry = request.app.state.server.responses.get(rid, request_tenant(request))
    if entry is None:
        raise APIError("response_not_found", f"Response with id '{rid}' not found.", "id")
    return entry


@router.get("/v1/responses/{rid}")
async def get_response(rid: str, request: Request):
    return _stored(request, rid).response


@router.delete("/v1/responses/{rid}")
async def delete_response(rid: str, request: Request):
    _stored(request, rid)
    request.app.state.server.responses.delete(rid, request_tenant(request))
    return {"id": rid, "object": "response.deleted", "deleted": True}


@router.get("/v1/responses/{rid}/input_items")
async def input_items(rid: str, request: Request):
    items = _stored(request, rid).input_items
    return {"object": "list", "data": items, "has_more": False,
            "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None}
