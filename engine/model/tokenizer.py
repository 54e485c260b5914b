"""Tokenizer over tokenizer.json (the `tokenizers` library), with EOS ids and the chat template."""
from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer

from engine.errors import ModelLoadError


class Tokenizer:
    def __init__(self, model_dir: str | Path, eos_token_ids: tuple[int, ...] = ()):
        model_dir = Path(model_dir)
        self.model_dir = model_dir
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise ModelLoadError(str(path), "no tokenizer.json in the model directory")
        self._tok = _HFTokenizer.from_file(str(path))
        conf_path = model_dir / "tokenizer_config.json"
        conf = json.loads(conf_path.read_text(encoding="utf-8")) if conf_path.is_file() else {}
        self.eos_token_ids: set[int] = set(eos_token_ids)
        eos = conf.get("eos_token")
        if isinstance(eos, dict):
            eos = eos.get("content")
        if isinstance(eos, str) and self._tok.token_to_id(eos) is not None:
            self.eos_token_ids.add(self._tok.token_to_id(eos))

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        """Every token, special ones included (what a parity check compares)."""
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def decode_text(self, ids) -> str:
        """The text a user reads: special tokens (end of turn, role markers) never appear in it."""
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The model directory's own template (ChatML when it has none), rendered by engine.model.chat
        as transformers renders it; raises engine.model.chat.ChatTemplateError (a ValueError)."""
        from engine.model.chat import render_chat
        return render_chat(self.model_dir, messages, add_generation_prompt)
