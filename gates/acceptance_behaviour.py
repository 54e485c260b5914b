"""The acceptance window's behaviour gates, through the official `openai` client as a user's
application would call the installed engine: a chat completion, a streamed one ending in a finish
reason, and a wrong key refused with openai.AuthenticationError. Each gate is {"name", "passed",
"detail"}; "name" and "passed" are what the acceptance predicate binds (`behaviour`)."""
from __future__ import annotations


def behaviour_gates(url: str, key: str, *, max_tokens: int = 8, timeout_s: float = 120.0) -> list[dict]:
    # openai is pinned in the `test` extra only (pyproject); imported here so that gates/ loads without it.
    import openai

    client = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key=key, max_retries=0, timeout=timeout_s)
    gates = []

    def gate(name: str, fn) -> None:
        try:
            passed, detail = fn()
        except openai.OpenAIError as exc:
            passed, detail = False, f"{type(exc).__name__}: {exc}"
        gates.append({"name": name, "passed": bool(passed), "detail": detail})

    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": "Say hello."}]

    def chat():
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens, temperature=0)
        c = r.choices[0]
        return c.finish_reason in ("stop", "length") and r.usage.completion_tokens > 0, \
            f"finish {c.finish_reason}, {r.usage.completion_tokens} tokens"

    def streaming():
        chunks, finish = 0, None
        with client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens, temperature=0,
                                            stream=True) as stream:
            for chunk in stream:
                if chunk.choices:
                    chunks += 1
                    finish = chunk.choices[0].finish_reason or finish
        return chunks > 0 and finish in ("stop", "length"), f"{chunks} chunks, finish {finish}"

    def bad_key():
        wrong = openai.OpenAI(base_url=client.base_url, api_key=key + "-wrong", max_retries=0, timeout=timeout_s)
        try:
            wrong.chat.completions.create(model=model, messages=messages, max_tokens=1)
        except openai.AuthenticationError as exc:
            return exc.status_code == 401, f"AuthenticationError {exc.status_code}"
        return False, "a wrong key was served"

    gate("chat-completion", chat)
    gate("chat-streaming", streaming)
    gate("bad-key-refused", bad_key)
    return gates


def auth_statuses(url: str, key: str, *, timeout_s: float = 30.0) -> dict:
    """The acceptance predicate's `auth`: GET /v1/engine/status with the key (want 200) and without
    any (want 401). The statuses are recorded as they came; the verdict compares them."""
    import httpx

    status = url.rstrip("/") + "/v1/engine/status"
    with httpx.Client(timeout=timeout_s) as http:
        authed = http.get(status, headers={"Authorization": f"Bearer {key}"}).status_code
        anonymous = http.get(status).status_code
    return {"authenticated_status": authed, "anonymous_status": anonymous}
