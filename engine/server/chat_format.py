"""Turning chat messages into a prompt: the model's own template, or the documented fallback.

Order: engine.chat (renders the model directory's Jinja template as transformers does, with
ChatML for a directory that has none), then the tokenizer's apply_chat_template, then the
simple fallback below.
"""
from __future__ import annotations

from typing import Any

from engine.server.errors import APIError

FALLBACK_DESCRIPTION = ("each message as `<|ROLE|>\\nCONTENT\\n`, then `<|assistant|>\\n` "
                        "to open the reply")


def fallback_template(messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    parts = [f"<|{m['role']}|>\n{m['content']}\n" for m in messages]
    return "".join(parts) + ("<|assistant|>\n" if add_generation_prompt else "")


def render_chat(tokenizer: Any, model_dir: str | None, messages: list[dict[str, str]],
                add_generation_prompt: bool = True) -> str:
    if model_dir is not None:
        try:
            from engine.model.chat import render_chat as engine_render
        except ImportError:
            engine_render = None
        if engine_render is not None:
            try:
                return engine_render(model_dir, messages,
                                     add_generation_prompt=add_generation_prompt)
            except ValueError as e:  # the template rejected these messages (e.g. role order)
                raise APIError("invalid_request", str(e), "messages") from None
    apply = getattr(tokenizer, "apply_chat_template", None)
    if apply is not None:
        text = apply(messages, add_generation_prompt=add_generation_prompt)
        if isinstance(text, str) and text:
            return text
    return fallback_template(messages, add_generation_prompt)


def stop_token_ids(tokenizer: Any, model_dir: str) -> list[int]:
    """End-of-sequence and end-of-turn ids: generation stops at either."""
    ids = set(getattr(tokenizer, "eos_token_ids", ()) or ())
    try:
        from engine.model.chat import end_of_turn_ids
        ids |= set(end_of_turn_ids(model_dir))
    except ImportError:
        pass
    return sorted(ids)
