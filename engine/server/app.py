"""The FastAPI application: routes, the gate in front of them (engine.server.gate), error shape."""
from __future__ import annotations

from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.server import (openapi, routes_chat, routes_completions, routes_engine,
                           routes_responses, routes_tokens)
from engine.server.errors import APIError, error_body
from engine.server.gate import Gate
from engine.server.state import ServerState


def create_app(state: ServerState) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app):
        # A request waiting for an engine slot holds a worker thread; give every running and
        # pending request one so that a full queue answers 429 instead of stalling.
        p = state.profile
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens,
                                   p["max_concurrency"] + p["max_pending_requests"] + 16)
        yield

    app = FastAPI(title="assay-engine", version=state.identity.get("engine_version", ""),
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json",
                  lifespan=lifespan)
    app.state.server = state
    for r in (routes_engine.router, routes_chat.router, routes_completions.router,
              routes_responses.router, routes_tokens.router):
        app.include_router(r)
    openapi.install(app)

    # Authentication, tenant, counting, and the 500 answer to anything the handlers below
    # do not turn into an error body.
    app.add_middleware(Gate, state=state)

    @app.exception_handler(APIError)
    async def api_error(_request: Request, exc: APIError):
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code,
                                                                  "invalid_request")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    return app
