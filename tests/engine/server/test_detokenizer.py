"""Incremental detokenising on the real tiny-model tokenizer: deltas add up to the whole."""
from engine.server.generation import Detokenizer
from engine.model.tokenizer import Tokenizer


def test_deltas_concatenate_to_full_text(tiny_model):
    tok = Tokenizer(tiny_model)
    text = "naïve café — 漢字 and emoji 🙂 end"
    ids = tok.encode(text)
    d = Detokenizer(tok, hidden=set())
    parts = [d.push(i) for i in ids] + [d.flush()]
    assert "".join(parts) == text
    assert all("\ufffd" not in p for p in parts)   # no half characters were sent


def test_trailing_stop_token_hidden(tiny_model):
    tok = Tokenizer(tiny_model)
    stop = sorted(tok.eos_token_ids)[0]
    d = Detokenizer(tok, hidden={stop})
    ids = tok.encode("hello") + [stop]
    assert "".join([d.push(i) for i in ids] + [d.flush()]) == "hello" == d.text()
