"""Server-sent events framing."""
from __future__ import annotations

import json
from typing import Any, AsyncIterator, Callable, Iterator

DONE = b"data: [DONE]\n\n"


def sse_data(payload: Any) -> bytes:
    """One `data:` event carrying compact JSON."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n"


def sse_event(event: str, payload: Any) -> bytes:
    """A named event (the Responses API names each event by its type)."""
    if "\n" in event or "\r" in event:
        raise ValueError("SSE event name must be a single line")
    return f"event: {event}\n".encode("utf-8") + sse_data(payload)


class ResponsesEventWriter:
    """Frames Responses API events with a contiguous sequence_number starting at 0."""

    def __init__(self) -> None:
        self.sequence_number = 0

    def __call__(self, event_type: str, **fields: Any) -> bytes:
        payload = {"type": event_type, "sequence_number": self.sequence_number, **fields}
        self.sequence_number += 1
        return sse_event(event_type, payload)


def event_stream(gen, events: Iterator[bytes],
                 error_event: Callable[[dict[str, Any]], bytes]) -> Any:
    """An SSE response over `events`, a blocking iterator stepped on worker threads.

    When the client goes away, the server cancels this response's task: the engine request is
    cancelled and its session released at once, not when the abandoned iterator is collected.
    A step that fails ends the stream with `error_event` (the OpenAI error body) and a proper
    end of the chunked body, so the client learns why and its connection stays usable."""
    from fastapi.responses import StreamingResponse
    from starlette.concurrency import run_in_threadpool

    from engine.server.errors import error_body

    end = object()

    async def body() -> AsyncIterator[bytes]:
        finished = False
        try:
            while True:
                try:
                    chunk = await run_in_threadpool(next, events, end)
                except Exception as e:  # noqa: BLE001 - any failure of a step ends the stream
                    gen.abort("server_error")
                    finished = True
                    yield error_event(error_body("internal_error",
                                                 f"internal error: {type(e).__name__}"))
                    return
                if chunk is end:
                    finished = True
                    return
                yield chunk
        finally:
            if not finished:  # cancelled: the client disconnected, or the server is stopping
                gen.abort("client_disconnected")
            close = getattr(events, "close", None)
            if close is not None:
                close()

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})
