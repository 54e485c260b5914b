"""Request bodies, validated strictly: an unknown key is an error that names it, and a value
of the wrong JSON type is never coerced ("10" is not a number, "yes" not a boolean)."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

_Temp = Annotated[float, Field(ge=0.0, le=2.0, allow_inf_nan=False)]
_TopP = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
_Tokens = Annotated[int, Field(ge=1, le=1_000_000)]
_Key = Annotated[str, Field(min_length=1, max_length=256)]
_Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]   # what a torch.Generator accepts
_Penalty = Annotated[float, Field(ge=-2.0, le=2.0, allow_inf_nan=False)]
_RepPenalty = Annotated[float, Field(gt=0.0, le=2.0, allow_inf_nan=False)]
_TopLogprobs = Annotated[int, Field(ge=0, le=20)]
# Checked by request_body.check_response_format: only {"type": "text"} is honoured, and
# anything else is refused by name (this engine has no constrained decoding).
_ResponseFormat = dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[TextPart]]
    name: str | None = None


class StreamOptions(_Strict):
    include_usage: bool = False


# Up to four stop strings, as OpenAI allows; the output ends where the first one begins.
_Stop = Union[Annotated[str, Field(min_length=1, max_length=256)],
              Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]],
                        Field(max_length=4)]]


def stop_list(stop: str | list[str] | None) -> list[str] | None:
    if stop is None:
        return None
    return [stop] if isinstance(stop, str) else list(stop) or None


class ChatCompletionRequest(_Strict):
    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: _Tokens | None = None
    max_completion_tokens: _Tokens | None = None
    temperature: _Temp | None = None
    top_p: _TopP | None = None
    seed: _Seed | None = None
    n: Annotated[int, Field(ge=1, le=1)] | None = None   # int, not Literal: True == 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    prompt_cache_key: _Key | None = None
    stop: _Stop | None = None
    presence_penalty: _Penalty | None = None
    frequency_penalty: _Penalty | None = None
    repetition_penalty: _RepPenalty | None = None
    logprobs: bool | None = None
    top_logprobs: _TopLogprobs | None = None
    response_format: _ResponseFormat | None = None


class CompletionRequest(_Strict):
    model: str
    # text, token ids, or a batch of one of either (one prompt per request)
    prompt: Union[str, Annotated[list[int], Field(min_length=1)],
                  Annotated[list[str], Field(min_length=1, max_length=1)],
                  Annotated[list[Annotated[list[int], Field(min_length=1)]],
                            Field(min_length=1, max_length=1)]]
    max_tokens: _Tokens | None = None
    temperature: _Temp | None = None
    top_p: _TopP | None = None
    seed: _Seed | None = None
    n: Annotated[int, Field(ge=1, le=1)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: _Stop | None = None
    user: str | None = None
    prompt_cache_key: _Key | None = None
    presence_penalty: _Penalty | None = None
    frequency_penalty: _Penalty | None = None
    repetition_penalty: _RepPenalty | None = None
    logprobs: _TopLogprobs | None = None        # the legacy form: how many alternatives
    response_format: _ResponseFormat | None = None


class TokenizeRequest(_Strict):
    model: str | None = None
    prompt: str | None = None
    messages: Annotated[list[ChatMessage], Field(min_length=1)] | None = None
    add_generation_prompt: bool = True


class DetokenizeRequest(_Strict):
    model: str | None = None
    tokens: list[Annotated[int, Field(ge=0)]]


class InputTextPart(_Strict):
    type: Literal["input_text", "output_text"]
    text: str


class InputMessage(_Strict):
    type: Literal["message"] | None = None
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[InputTextPart]]


class ResponsesRequest(_Strict):
    model: str
    input: Union[str, Annotated[list[InputMessage], Field(min_length=1)]]
    instructions: str | None = None
    previous_response_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    store: bool = True
    max_output_tokens: _Tokens | None = None
    temperature: _Temp | None = None
    top_p: _TopP | None = None
    stream: bool = False
    prompt_cache_key: _Key | None = None
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = None
    user: str | None = None


class CheckpointRequest(_Strict):
    session: _Key


def content_text(content: str | list) -> str:
    """The text of a message's content, whichever form it came in."""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)
