"""`python -m engine generate --chat`: the model's template in, generation stopped at end of turn."""
from __future__ import annotations

import json
import subprocess
import sys


def test_generate_chat_answers_and_stops_at_im_end(model_dir):
    run = subprocess.run([sys.executable, "-m", "engine", "generate", "--model", str(model_dir), "--chat",
                          "--prompt", "What is the capital of France?", "--max-new-tokens", "48",
                          "--dtype", "float32", "--device", "cpu", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "Paris" in out["text"]
    assert out["token_ids"][-1] == 2 and out["token_ids"].count(2) == 1      # <|im_end|>, once
    assert out["stats"]["generated_tokens"] < 48
    # The text a user reads holds no special token; the ids still show where generation stopped.
    assert "<|im_end|>" not in out["text"] and "<|" not in out["text"]
    # The prompt was the chat template, not the bare question (which is 7 tokens).
    assert out["stats"]["prompt_tokens"] > 20


def test_generate_chat_plain_text_has_no_end_of_turn(model_dir):
    run = subprocess.run([sys.executable, "-m", "engine", "generate", "--model", str(model_dir), "--chat",
                          "--prompt", "What color is the sky? One word.", "--max-new-tokens", "24",
                          "--dtype", "float32", "--device", "cpu"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    text = run.stdout.strip()
    assert text and "blue" in text.lower()
    assert "<|im_end|>" not in text and "<|im_start|>" not in text
