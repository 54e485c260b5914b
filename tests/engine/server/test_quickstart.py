"""docs/QUICKSTART.md is true to the engine: every executable block, run in order with
`bash -eo pipefail` and the environment the acceptance window sets, exits 0 against a real server on
the tiny model; and the same blocks fail against a server that does not hold the key they use, so
they can fail."""
from __future__ import annotations

import os
import subprocess

import pytest

from flows.release_assets import QUICKSTART
from releases.docs_blocks import extract

BLOCKS = extract(QUICKSTART.read_text(encoding="utf-8"))


def _run(block, url: str, key_file) -> subprocess.CompletedProcess:
    env = {**os.environ, "ASSAY_URL": url, "ASSAY_API_KEY_FILE": str(key_file)}
    return subprocess.run(["bash", "-eo", "pipefail", "-c", block.text], env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_quickstart_has_the_blocks_a_user_runs():
    assert [b.heading for b in BLOCKS] == ["Check the engine with your key", "Requests without the key are refused",
                                           "Chat completion", "Streaming"]
    assert all(b.lang == "bash" for b in BLOCKS)


@pytest.mark.slow
def test_every_block_exits_0_against_the_engine(server):
    key_file = server.workdir / "keys"
    for block in BLOCKS:
        proc = _run(block, server.url, key_file)
        assert proc.returncode == 0, f"block {block.index} ({block.heading}): {proc.stdout}{proc.stderr}"
        if block.heading == "Requests without the key are refused":
            assert "HTTP 401" in proc.stdout


@pytest.mark.slow
def test_a_wrong_key_fails_the_authenticated_blocks(server, tmp_path):
    wrong = tmp_path / "wrong-key"
    wrong.write_text("not-the-key\n")
    codes = {b.heading: _run(b, server.url, wrong).returncode for b in BLOCKS}
    assert codes["Requests without the key are refused"] == 0
    assert all(code != 0 for heading, code in codes.items() if heading != "Requests without the key are refused")
