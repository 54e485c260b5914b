"""One engine server seen from outside: the OpenAI-compatible chat API over HTTP (docs/API.md).

gates/ never imports the engine; everything here is a request and its streamed answer. Timing
is taken on this side of the socket, as a user would see it: time to the first content delta
(TTFT) and the time between the first and the last delta (decode).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import httpx

from gates.judged.errors import EndpointUnavailable


@dataclass(frozen=True)
class Completion:
    """What one request produced; `error` is set (and the rest empty) when it failed."""
    text: str = ""
    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ttft_s: float | None = None
    decode_s: float | None = None
    wall_s: float = 0.0
    started_at: float = 0.0
    first_token_at: float | None = None
    error: str | None = None

    @property
    def output_sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class Endpoint:
    """A served engine: base URL, API key (or None) and the model it serves, discovered once."""

    def __init__(self, role: str, base_url: str, api_key: str | None, *, timeout_s: float = 120.0):
        self.role, self.url, self.timeout_s = role, base_url.rstrip("/"), timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)
        self._model: str | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Endpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def model(self) -> str:
        if self._model is None:
            self._model = self._get("/v1/models")["data"][0]["id"]
        return self._model

    def status(self) -> dict:
        """GET /v1/engine/status (needs the API key)."""
        return self._get("/v1/engine/status")

    def post(self, path: str, body: dict) -> dict:
        try:
            resp = self._http.post(path, json=body)
        except httpx.HTTPError as exc:
            raise EndpointUnavailable(self.role, self.url, f"POST {path}: {exc}") from exc
        if resp.status_code >= 400:
            raise EndpointUnavailable(self.role, self.url, f"POST {path}: HTTP {resp.status_code} {resp.text[:200]}")
        return resp.json()

    def _get(self, path: str) -> dict:
        try:
            resp = self._http.get(path)
            resp.raise_for_status()
            return resp.json()
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
            raise EndpointUnavailable(self.role, self.url, f"GET {path}: {exc}") from exc

    def chat(self, messages: list[dict], max_tokens: int, *, cache_key: str | None = None) -> Completion:
        """One greedy streamed chat completion. Transport and HTTP errors become Completion.error
        (a gate counts them); only an unreachable server before any request is EndpointUnavailable."""
        body: dict = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                      "stream": True, "stream_options": {"include_usage": True}}
        if cache_key is not None:
            body["prompt_cache_key"] = cache_key
        started = time.monotonic()
        first: float | None = None
        last: float | None = None
        finished: float | None = None
        parts: list[str] = []
        usage: dict = {}
        try:
            with self._http.stream("POST", "/v1/chat/completions", json=body) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    return Completion(error=f"HTTP {resp.status_code}: {_error_code(resp)}", started_at=started,
                                      wall_s=time.monotonic() - started)
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices", []):
                        if choice.get("finish_reason") and finished is None:
                            finished = time.monotonic()
                        text = (choice.get("delta") or {}).get("content") or ""
                        if text:
                            now = time.monotonic()
                            first = now if first is None else first
                            last = now
                            parts.append(text)
        except (httpx.HTTPError, ValueError) as exc:
            return Completion(error=f"{type(exc).__name__}: {exc}", started_at=started,
                              wall_s=time.monotonic() - started)
        ended = time.monotonic()
        details = usage.get("prompt_tokens_details") or {}
        # An answer with no text (an immediate stop) has its first token at the finish chunk.
        first = first if first is not None else finished
        return Completion(
            text="".join(parts), completion_tokens=int(usage.get("completion_tokens", 0)),
            prompt_tokens=int(usage.get("prompt_tokens", 0)), cached_tokens=int(details.get("cached_tokens") or 0),
            ttft_s=None if first is None else first - started,
            decode_s=None if first is None or last is None else last - first,
            wall_s=ended - started, started_at=started, first_token_at=first)


def _error_code(resp: httpx.Response) -> str:
    try:
        return resp.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return resp.text[:120]
