"""GET /openapi.json: the routes and, for each POST route, the request body it validates.

The routes read their bodies themselves (engine.server.request_body, to answer 400 in the
OpenAI error shape rather than FastAPI's 422), so FastAPI cannot see the body models; they
are added here from the same pydantic models the routes validate against.
"""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from engine.server import api_models as m

BODIES: dict[str, type] = {
    "/v1/chat/completions": m.ChatCompletionRequest, "/v1/completions": m.CompletionRequest,
    "/v1/responses": m.ResponsesRequest, "/v1/engine/checkpoints": m.CheckpointRequest,
    "/tokenize": m.TokenizeRequest, "/detokenize": m.DetokenizeRequest,
}
_REF = "#/components/schemas/{model}"


def build_openapi(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for path, model in BODIES.items():
        op = doc.get("paths", {}).get(path, {}).get("post")
        if op is None:
            continue
        schema = model.model_json_schema(ref_template=_REF)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": _REF.format(model=model.__name__)}}}}
    return doc


def install(app: FastAPI) -> None:
    cache: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not cache:
            cache.update(build_openapi(app))
        return cache

    app.openapi = openapi  # type: ignore[method-assign]
