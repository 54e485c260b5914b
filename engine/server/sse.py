"""Server-sent events framing."""
from __future__ import annotations

import json
from typing import Any

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


def event_stream(gen, events):
    """An SSE response over `events`; the generation is aborted when the client goes away or a
    step fails, so its KV blocks and its slot are given back at once."""
    from fastapi.responses import StreamingResponse

    def guarded():
        try:
            yield from events
        except GeneratorExit:
            gen.abort("client_disconnected")
            raise
        except BaseException:
            gen.abort("server_error")
            raise

    return StreamingResponse(guarded(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
