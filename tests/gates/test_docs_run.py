"""gates/docs_run: the quickstart's blocks run on a real host (this one, LocalHost) against a real
engine on the tiny model; the record binds each block's digest, exit status and duration, and a
wrong key shows up as non-zero exit statuses of the blocks that need it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from flows.release_assets import QUICKSTART
from gates.docs_run import run_blocks
from hosts.local import LocalHost
from releases.docs_blocks import extract
from tests.engine.server.live import Server, base_profile

pytestmark = pytest.mark.slow
TEXT = QUICKSTART.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = tmp_path_factory.mktemp("model") / "tiny"
    subprocess.run([sys.executable, "-m", "engine", "make-tiny-model", str(model)], check=True,
                   capture_output=True, timeout=120)
    with Server(tmp_path_factory.mktemp("srv"), base_profile(model)) as s:
        yield s


def test_every_block_recorded_with_exit_0(server):
    env = {"ASSAY_URL": server.url, "ASSAY_API_KEY_FILE": str(server.workdir / "keys")}
    record = run_blocks(LocalHost(), TEXT, "QUICKSTART.md", env)
    blocks = extract(TEXT)
    assert record["asset"] == "QUICKSTART.md"
    assert [(b["index"], b["heading"], b["sha256"]) for b in record["blocks"]] == [(b.index, b.heading, b.sha256) for b in blocks]
    assert [b["exit_status"] for b in record["blocks"]] == [0] * len(blocks)
    assert all(0 < b["duration_s"] < 60 for b in record["blocks"])


def test_a_wrong_key_fails_the_blocks_that_need_it(server, tmp_path):
    (tmp_path / "wrong").write_text("wrong-key\n")
    env = {"ASSAY_URL": server.url, "ASSAY_API_KEY_FILE": str(tmp_path / "wrong")}
    statuses = {b["heading"]: b["exit_status"] for b in run_blocks(LocalHost(), TEXT, "QUICKSTART.md", env)["blocks"]}
    assert statuses.pop("Requests without the key are refused") == 0
    assert statuses and all(s != 0 for s in statuses.values())


def test_a_block_past_its_limit_records_124_and_the_next_block_still_runs():
    text = "# Doc\n\n## Slow\n\n```bash\nsleep 30\n```\n\n## Fails\n\n```sh\nexit 3\n```\n\n```bash no-run\nexit 9\n```\n"
    record = run_blocks(LocalHost(), text, "DOC.md", {}, timeout_s=1.0)
    assert [(b["heading"], b["exit_status"]) for b in record["blocks"]] == [("Slow", 124), ("Fails", 3)]
    assert record["blocks"][0]["duration_s"] < 10
