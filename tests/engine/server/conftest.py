import pytest

from tests.engine.server.live import Server, base_profile


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """The tiny model, made by the engine's own command into a temporary directory."""
    import subprocess
    import sys
    out = tmp_path_factory.mktemp("model") / "tiny"
    proc = subprocess.run([sys.executable, "-m", "engine", "make-tiny-model", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "config.json").is_file()
    return out


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    """One shared server for the API and error tests; checkpoints off, key required, n-gram
    speculative decoding on (the tiny model's repetitive output gives it hits)."""
    profile = {**base_profile(tiny_model), "speculative": {"backend": "ngram", "draft_tokens": 4}}
    with Server(tmp_path_factory.mktemp("srv"), profile) as s:
        yield s
