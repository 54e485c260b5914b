"""Reading a JSON body into a strict model; every failure becomes a typed API error."""
from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from engine.runtime.sampling import SamplingParams
from engine.server.errors import APIError
from engine.server.json_body import BodyError, decode_json_body
from engine.server.state import ServerState

M = TypeVar("M", bound=BaseModel)
# The engine samples in float32, where a temperature or top_p this small (1e-320 is a valid
# JSON number in range) rounds to 0: the logits overflow to inf, or no token is kept. Either
# setting below it picks the most likely token anyway, so the request samples greedily.
GREEDY_BELOW = 1e-5


def _param(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# Top-level parameters that lenient mode must not drop when they ask for something: ignoring
# them would answer a different question than the one asked (another output format, no
# log-probabilities, other sampling). Each maps to the values that ask for nothing.
UNHONOURED: dict[str, tuple] = {
    "response_format": ({"type": "text"},), "logprobs": (False, None), "top_logprobs": (0, None),
    "tools": ([], None), "functions": ([], None), "echo": (False, None), "suffix": (None, ""),
    "best_of": (1, None), "presence_penalty": (0, 0.0, None), "frequency_penalty": (0, 0.0, None),
    "logit_bias": ({}, None), "repetition_penalty": (1, 1.0, None),
}


def _refuse_unhonoured(model: type[M], data: dict) -> None:
    for name, neutral in UNHONOURED.items():
        if name in data and name not in model.model_fields and not any(
                data[name] == v and type(data[name]) is type(v) for v in neutral):
            raise APIError("invalid_request", f"'{name}' is not supported by this server "
                           f"(only {', '.join(map(repr, neutral))}); it is refused rather than "
                           f"ignored, since ignoring it would change the answer", name)


def _drop_unknown(model: type[M], data: dict) -> list[str]:
    """The lenient profile: remove every key the model does not define, at any depth; returns
    their paths. Validation names them; each round removes what it named."""
    ignored: list[str] = []
    for _ in range(16):  # bounded: each round removes at least one key
        try:
            model.model_validate(data, strict=True)
            break
        except ValidationError as e:
            extra = [x["loc"] for x in e.errors() if x["type"] == "extra_forbidden"]
        if not extra:
            break
        removed = 0
        for loc in map(_clean, extra):
            parent = data
            try:
                for part in loc[:-1]:
                    parent = parent[part]
            except (KeyError, IndexError, TypeError):
                continue
            if isinstance(parent, dict) and loc[-1] in parent:
                del parent[loc[-1]]
                ignored.append(_param(loc))
                removed += 1
        if not removed:
            break
    return ignored


def _clean(loc: tuple) -> tuple:
    """A pydantic error location without its union-branch tags ("str", "list[TextPart]")."""
    return tuple(p for p in loc if not _branch(p))


def _branch(part) -> bool:
    """Whether a location part is pydantic's tag for one branch of a union."""
    return isinstance(part, str) and ("[" in part or "-" in part or part in ("str", "list", "int"))


def _kind(tag: str) -> str:
    """The JSON kind a union branch accepts: its tag without constraints or item types."""
    return tag.removeprefix("constrained-").split("[", 1)[0]


_JSON_KIND = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict",
              type(None): "null"}


def _describe(errs: list[dict], start: int = 0) -> tuple[str, str]:
    """The parameter and message for the first invalid value. Where the value could take
    several forms (a union), pydantic reports errors for every form; the ones that count are
    those of the form of the value's own kind (a list's bad item, not "should be a valid
    string"), and a value of no accepted kind is named by its kind against the forms."""
    first = errs[0]
    loc = tuple(first["loc"])
    at = next((i for i, p in enumerate(loc) if i >= start and _branch(p)), None)
    if at is None:
        return _param(_clean(loc)), first["msg"]
    head = loc[:at]
    forms: dict[str, list[dict]] = {}
    for x in errs:
        if tuple(x["loc"])[:at] == head and len(x["loc"]) > at and _branch(x["loc"][at]):
            forms.setdefault(x["loc"][at], []).append(x)
    got = _JSON_KIND.get(type(first.get("input")), type(first.get("input")).__name__)
    same = [f for f in forms if _kind(f) == got
            or (_kind(f) not in _JSON_KIND.values() and got == "dict")]
    if same:
        # The form the value comes closest to: one whose first item is of the right kind
        # (a wrong kind there says the list is of another form), then the deepest error.
        def closeness(f: str) -> tuple:
            wrong_first = any(x["type"].endswith("_type") and len(x["loc"]) == at + 2
                              and x["loc"][at + 1] == 0 for x in forms[f])
            return (not wrong_first, max(len(x["loc"]) for x in forms[f]))
        return _describe(forms[max(same, key=closeness)], at + 1)
    names = " or ".join(f.replace("constrained-", "") for f in forms)
    return _param(_clean(head)), f"expected {names}, got {got}"


async def parse_body(request: Request, model: type[M], max_bytes: int) -> M:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise APIError("request_too_large", f"request body of {declared} bytes exceeds the "
                       f"limit of {max_bytes} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise APIError("request_too_large", f"request body exceeds the limit of "
                           f"{max_bytes} bytes")
    try:
        data = decode_json_body(body)
    except BodyError as e:
        raise APIError("invalid_request", e.message, e.param) from None
    st = request.app.state.server
    if st.profile["unknown_parameters"] == "lenient":
        _refuse_unhonoured(model, data)
        ignored = _drop_unknown(model, data)
        if ignored:
            st.log.write("parameters_ignored", route=request.url.path, params=ignored)
    try:
        # strict: a string is never coerced to a number or a boolean ("10", "yes")
        return model.model_validate(data, strict=True)
    except ValidationError as e:
        errs = e.errors()
        # An unknown key is the most useful thing to name, whatever else is wrong.
        extra = next((x for x in errs if x["type"] == "extra_forbidden"), None)
        if extra is not None:
            param = _param(_clean(extra["loc"])) or None
            raise APIError("unknown_parameter", f"Unrecognized request argument supplied: "
                           f"{param}", param) from None
        param, msg = _describe(errs)
        raise APIError("invalid_request", f"Invalid value for '{param}': {msg}",
                       param or None) from None


def check_model(state: ServerState, name: str) -> None:
    if name != state.model_name:
        raise APIError("model_not_found", f"The model '{name}' does not exist; this server "
                       f"serves '{state.model_name}'", "model")


def check_response_format(fmt: dict | None) -> None:
    """Only plain text: json_object and json_schema need constrained decoding, which this
    engine does not do; they are refused by name rather than answered unconstrained."""
    if fmt is None or fmt == {"type": "text"}:
        return
    kind = fmt.get("type")
    if kind in ("json_object", "json_schema"):
        raise APIError("invalid_request", f"response_format of type '{kind}' is not supported: "
                       f"this server has no constrained decoding; only {{\"type\": \"text\"}} "
                       f"is accepted", "response_format")
    raise APIError("invalid_request", "response_format must be {\"type\": \"text\"} (the only "
                   f"format this server supports), got {fmt!r}"[:300], "response_format")


def sampling_params(state: ServerState, prompt_len: int, max_tokens: int | None,
                    temperature: float | None, top_p: float | None, seed: int | None,
                    max_param: str, *, presence_penalty: float | None = None,
                    frequency_penalty: float | None = None,
                    repetition_penalty: float | None = None,
                    logprobs: int | None = None) -> SamplingParams:
    """Bound the output by the context: an explicit request past it is an error."""
    ctx = state.profile["max_context"]
    room = ctx - prompt_len
    if room < 1:
        raise APIError("context_length_exceeded", f"the prompt has {prompt_len} tokens; this "
                       f"model's maximum context length is {ctx} tokens", "messages")
    if max_tokens is not None and prompt_len + max_tokens > ctx:
        raise APIError("context_length_exceeded", f"{prompt_len} prompt tokens + {max_tokens} "
                       f"requested output tokens exceed the maximum context length of {ctx} "
                       f"tokens", max_param)
    temperature = 1.0 if temperature is None else temperature
    top_p = 1.0 if top_p is None else top_p
    if temperature < GREEDY_BELOW or top_p < GREEDY_BELOW:
        temperature, top_p = 0.0, 1.0
    return SamplingParams(max_new_tokens=max_tokens or room, temperature=temperature,
                          top_p=top_p, seed=seed,
                          stop_token_ids=list(state.stop_token_ids),
                          presence_penalty=float(presence_penalty or 0.0),
                          frequency_penalty=float(frequency_penalty or 0.0),
                          repetition_penalty=float(1.0 if repetition_penalty is None
                                                   else repetition_penalty),
                          logprobs=logprobs)
