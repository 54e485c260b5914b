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


def test_special_tokens_never_reach_the_text(tiny_model):
    tok = Tokenizer(tiny_model)
    start, end = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")
    assert start is not None and end is not None
    d = Detokenizer(tok, hidden=set())      # not a stop id: a special token in the middle of an answer
    ids = tok.encode("one") + [end, start] + tok.encode(" two")
    assert "".join([d.push(i) for i in ids] + [d.flush()]) == "one two" == d.text()
    assert "<|im_end|>" in tok.decode(ids)   # the raw decode (parity checks) still shows every token
