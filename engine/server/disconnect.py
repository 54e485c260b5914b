"""Noticing a client that hangs up while its request waits for a slot or generates without
streaming (a streamed answer hears it through its StreamingResponse, engine.server.sse)."""
from __future__ import annotations

from typing import Any, Callable

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request


async def run_unless_disconnected(request: Request, gen: Any, fn: Callable[..., Any],
                                  *args: Any) -> Any:
    """fn(*args) on a worker thread. If the client disconnects first, `gen` is aborted at
    once (its engine request cancelled, its session released), and fn then returns early
    against the cancelled request."""

    async def watch() -> None:
        # The body has been read, so the next message can only be the disconnect.
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gen.abort("client_disconnected")

    result: Any = None
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            result = await run_in_threadpool(fn, *args)
        except Exception as e:  # raised below as itself, not wrapped in the group's ExceptionGroup
            error = e
        finally:
            tg.cancel_scope.cancel()
    if error is not None:
        raise error
    return result
