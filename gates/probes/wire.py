"""HTTP to the engine under test, with the standard library only."""

import json
import time
import urllib.error
import urllib.request


def request(base, method, path, *, key=None, body=None, raw=None, timeout=600, auth=True):
    """(status, parsed JSON or None). `raw` sends bytes as they are (for bad-input probes)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if key is not None and auth:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, payload = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, None


def stream(base, path, body, *, key, timeout=600):
    """POST with stream=true; returns (status, [(seconds since send, parsed data or "[DONE]")], error)."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    t0 = time.monotonic()
    events = []
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for raw in resp:
                line = raw.decode("utf-8").rstrip("\r\n")
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                events.append((time.monotonic() - t0, data if data == "[DONE]" else json.loads(data)))
            return resp.status, events, None
    except urllib.error.HTTPError as err:
        try:
            return err.code, events, json.loads(err.read())
        except ValueError:
            return err.code, events, None


def chat_body(model, text, max_tokens, **extra):
    return {"model": model, "messages": [{"role": "user", "content": text}], "temperature": 0,
            "max_tokens": max_tokens, **extra}


def chat(base, key, model, text, max_tokens, timeout=600, **extra):
    """(status, text or None, usage or None, error code or None)."""
    status, out = request(base, "POST", "/v1/chat/completions", key=key,
                          body=chat_body(model, text, max_tokens, **extra), timeout=timeout)
    if status == 200:
        return status, out["choices"][0]["message"]["content"], out["usage"], None
    return status, None, None, error_code(out)


def error_code(out):
    try:
        return out["error"]["code"]
    except (TypeError, KeyError):
        return None


def error_shape_ok(out):
    try:
        err = out["error"]
        return set(err) == {"message", "type", "param", "code"} and isinstance(err["message"], str)
    except (TypeError, KeyError):
        return False


def wait(base, timeout_s=600):
    deadline = time.monotonic() + timeout_s
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        try:
            status, out = request(base, "GET", "/health", timeout=5)
            if status == 200 and out == {"status": "ok"}:
                return {"ready": True, "waited_s": round(time.monotonic() - t0, 3)}
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    return {"ready": False, "waited_s": round(time.monotonic() - t0, 3)}
