"""Run a document's executable blocks on a host, in order, and record what the acceptance predicate
binds of them (releases/schemas/acceptance.schema.json, `docs`): each block's index, heading and
sha256 with its exit status and duration.

Each block runs as `bash -eo pipefail -c BLOCK` (docs/QUICKSTART.md says so to its reader) with the
window's environment (ASSAY_URL, ASSAY_API_KEY_FILE). Every block runs, even after one fails, so the
record names each failing block rather than only the first."""
from __future__ import annotations

import hashlib
import time
from typing import Callable, Mapping

from hosts.errors import CommandTimeout
from releases.docs_blocks import extract

TIMED_OUT = 124  # the exit status timeout(1) gives a command it stopped; a block past its limit records it


def run_blocks(host, text: str, asset: str, env: Mapping[str, str], *, timeout_s: float = 120.0,
               say: Callable[[str], None] = lambda line: None) -> dict:
    """{"asset", "sha256" (of TEXT, UTF-8), "blocks": [{"index", "heading", "sha256", "exit_status",
    "duration_s"}]}, the blocks of TEXT run on HOST in order."""
    out = []
    for block in extract(text):
        started = time.monotonic()
        try:
            status = host.run(["bash", "-eo", "pipefail", "-c", block.text], env=dict(env), timeout=timeout_s).exit_code
        except CommandTimeout:
            status = TIMED_OUT
        duration = round(time.monotonic() - started, 3)
        say(f"{asset} block {block.index} ({block.heading}): exit {status} in {duration}s")
        out.append({**block.record(), "exit_status": status, "duration_s": duration})
    return {"asset": asset, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "blocks": out}
