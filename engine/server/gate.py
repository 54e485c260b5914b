"""The ASGI layer in front of every route: authentication, the caller's tenant, the request
counter, and the answer to a request that failed with a bug.

A plain ASGI middleware rather than Starlette's `@app.middleware("http")`: that one runs the
route in a task of its own and relays a streamed body through a memory channel, so a client
that hangs up mid-stream is never seen by the route, which then generates to the end.
Here the route's own StreamingResponse hears the disconnect and cancels at once.
"""
from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.server.errors import error_body
from engine.server.tenancy import tenant_id

OPEN_PATHS = frozenset({"/health"})
# Status reveals identity and memory figures: it needs a key even when no key file is set,
# in which case it cannot be read at all.
ALWAYS_AUTH = frozenset({"/v1/engine/status"})


class Gate:
    def __init__(self, app: ASGIApp, state: Any):
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        st = self.state
        path = scope["path"]
        key = st.auth.match(Headers(scope=scope).get("authorization"))
        denied = (st.auth.enabled and key is None and path not in OPEN_PATHS) or (
            path in ALWAYS_AUTH and not st.auth.enabled)
        # Request.state reads scope["state"]: the routes find their tenant there.
        scope.setdefault("state", {})["tenant"] = tenant_id(key)
        status: list[int] = []

        async def counted_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            if denied:
                await JSONResponse(error_body(
                    "invalid_api_key", "Incorrect or missing API key: send "
                    "'Authorization: Bearer KEY'."), status_code=401)(scope, receive, counted_send)
            else:
                try:
                    await self.app(scope, receive, counted_send)
                except Exception as exc:  # noqa: BLE001 - a bug in a route; see internal_error
                    if status:  # the answer had begun: uvicorn ends the connection
                        raise
                    await self.internal_error(path, exc)(scope, receive, counted_send)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            st.metrics.requests.labels(route=route, status=str(status[0] if status else 500)).inc()

    def internal_error(self, path: str, exc: Exception) -> JSONResponse:
        # Answered here instead of by Starlette's outermost handler, which re-raises after
        # answering, so that uvicorn drops the connection without a word. What the request
        # left half-done is unknown, so the connection is closed, and the client is told so.
        self.state.log.write("request_error", route=path, reason=type(exc).__name__)
        return JSONResponse(error_body("internal_error", f"internal error: "
                                       f"{type(exc).__name__}"), status_code=500,
                            headers={"Connection": "close"})
