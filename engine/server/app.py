"""The FastAPI application: routes, authentication, error shape, request metrics."""
from __future__ import annotations

from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.server import routes_chat, routes_engine, routes_responses
from engine.server.errors import APIError, error_body
from engine.server.state import ServerState

OPEN_PATHS = frozenset({"/health"})
# Status reveals identity and memory figures: it needs a key even when no key file is set,
# in which case it cannot be read at all.
ALWAYS_AUTH = frozenset({"/v1/engine/status"})


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
                  docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.server = state
    for r in (routes_engine.router, routes_chat.router, routes_responses.router):
        app.include_router(r)

    @app.middleware("http")
    async def auth_and_count(request: Request, call_next):
        path = request.url.path
        denied = path not in OPEN_PATHS and not state.auth.check(
            request.headers.get("authorization"))
        if path in ALWAYS_AUTH and not state.auth.enabled:
            denied = True
        if denied:
            response = JSONResponse(error_body(
                "invalid_api_key", "Incorrect or missing API key: send "
                "'Authorization: Bearer KEY'."), status_code=401)
        else:
            response = await call_next(request)
        route = request.scope.get("route")
        label = getattr(route, "path", "unmatched")
        state.metrics.requests.labels(route=label, status=str(response.status_code)).inc()
        return response

    @app.exception_handler(APIError)
    async def api_error(_request: Request, exc: APIError):
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code,
                                                                  "invalid_request")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        state.log.write("request_error", route=request.url.path, reason=type(exc).__name__)
        return JSONResponse(error_body("internal_error", f"internal error: "
                                       f"{type(exc).__name__}"), status_code=500)

    return app
