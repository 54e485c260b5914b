"""Chat templates: render a model's Jinja chat template in a sandbox, and find its end-of-turn ids.

Renders as Hugging Face transformers does (trim_blocks, lstrip_blocks, `raise_exception`,
`tojson`, `strftime_now`), so a model's own template gives the prompt it was trained on.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# For model directories without a template of their own (the tiny test model): plain ChatML.
FALLBACK_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
                     "message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
                     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# Tokens that close a turn in the common chat formats; any of them present in the vocabulary stops.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


class ChatTemplateError(ValueError):
    """A template that does not parse, raises while rendering, or messages of the wrong shape."""


def _raise_exception(message: str):
    raise ChatTemplateError(f"chat template raised: {message}")


def _tojson(value, indent=None):
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=False)


@lru_cache(maxsize=16)
def _compile(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now(timezone.utc).strftime(fmt)
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(f"chat template does not parse (line {e.lineno}): {e.message}") from None


def _check_messages(messages) -> list[dict]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ChatTemplateError("messages must be a non-empty list of {'role', 'content'} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise ChatTemplateError(f"messages[{i}] must be a dict with a string 'role' and a 'content'")
        if not isinstance(m["content"], str):
            raise ChatTemplateError(f"messages[{i}]['content'] must be a string")
    return [dict(m) for m in messages]


def apply_chat_template(template: str | None, messages, add_generation_prompt: bool = True,
                        bos_token: str = "", eos_token: str = "", **extra) -> str:
    """The prompt text for messages; `template` None uses FALLBACK_TEMPLATE."""
    msgs = _check_messages(messages)
    try:
        return _compile(template or FALLBACK_TEMPLATE).render(
            messages=msgs, add_generation_prompt=add_generation_prompt,
            bos_token=bos_token, eos_token=eos_token, **extra)
    except jinja2.exceptions.SecurityError as e:
        raise ChatTemplateError(f"chat template tried an unsafe operation: {e}") from None
    except (jinja2.TemplateError, TypeError, KeyError) as e:
        if isinstance(e, ChatTemplateError):
            raise
        raise ChatTemplateError(f"chat template failed to render: {e}") from None


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ChatTemplateError(f"{path.name} is not valid JSON: {e}") from None
    return data if isinstance(data, dict) else {}


def _token_text(value) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def load_chat_template(model_dir: str | Path) -> tuple[str | None, str, str]:
    """(template or None, bos_token, eos_token) from tokenizer_config.json or chat_template.jinja."""
    model_dir = Path(model_dir)
    conf = _read_json(model_dir / "tokenizer_config.json")
    template = conf.get("chat_template")
    if isinstance(template, list):  # named templates: use "default"
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    jinja_file = model_dir / "chat_template.jinja"
    if not template and jinja_file.is_file():
        template = jinja_file.read_text(encoding="utf-8")
    return (template or None), _token_text(conf.get("bos_token")), _token_text(conf.get("eos_token"))


def render_chat(model_dir: str | Path, messages, add_generation_prompt: bool = True) -> str:
    """The model directory's own template applied to messages (FALLBACK_TEMPLATE if it has none)."""
    template, bos, eos = load_chat_template(model_dir)
    return apply_chat_template(template, messages, add_generation_prompt, bos_token=bos, eos_token=eos)


def end_of_turn_ids(model_dir: str | Path) -> set[int]:
    """Ids that end an assistant turn: the configured EOS ids plus known end-of-turn tokens."""
    model_dir = Path(model_dir)
    ids: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        eos = _read_json(model_dir / name).get("eos_token_id")
        ids.update(int(e) for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int))
    vocab = _added_tokens(model_dir)
    eos_text = _token_text(_read_json(model_dir / "tokenizer_config.json").get("eos_token"))
    for text in (eos_text, *END_OF_TURN_TOKENS):
        if text in vocab:
            ids.add(vocab[text])
    return ids


def _added_tokens(model_dir: Path) -> dict[str, int]:
    data = _read_json(model_dir / "tokenizer.json")
    return {t["content"]: int(t["id"]) for t in data.get("added_tokens", []) if "content" in t and "id" in t}
