"""The cpu-smoke lane: install the candidate wheel, make the tiny model, generate twice through the
engine's CLI and require byte-identical outputs. Talks to the engine only through its CLI."""

from __future__ import annotations

import hashlib
import json
import posixpath
from pathlib import Path

from gates.install import Installed, check_identity, install_wheel
from gates.phases import Phase, PhaseFailed

SMOKE_PROMPT_IDS = "1,2,3,4,5,6,7,8"
SMOKE_NEW_TOKENS = 16


def _output_digest(stdout: str) -> tuple[str, int]:
    """Digest of what was generated (tokens and text), not of the timing stats beside it."""
    try:
        out = json.loads(stdout.strip().splitlines()[-1])
        generated = {"token_ids": out["token_ids"], "text": out["text"]}
    except (ValueError, KeyError, IndexError) as exc:
        raise PhaseFailed(f"generate printed no JSON result: {exc}") from None
    blob = json.dumps(generated, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest(), len(out["token_ids"])


def cpu_smoke_phases(host, wheel: Path, workdir: str, base_python: str, expected_version: str,
                     timeout: float = 600) -> list[Phase]:
    state: dict = {}
    model_dir = posixpath.join(workdir, "tiny-model")

    def install() -> dict:
        installed, facts = install_wheel(host, wheel, workdir, base_python, timeout)
        state["installed"] = installed
        return facts

    def identity() -> dict:
        return check_identity(host, state["installed"], expected_version)

    def tiny_model() -> dict:
        installed: Installed = state["installed"]
        host.remove(model_dir)
        out = host.run([installed.python, "-m", "engine", "make-tiny-model", model_dir, "--seed", "0"],
                       cwd=installed.cwd, env=installed.env, replace_env=True, timeout=timeout)
        if out.exit_code != 0:
            raise PhaseFailed("make-tiny-model failed", {"exit_code": out.exit_code, "stderr_tail": out.stderr[-2000:]})
        return {"arch": "qwen3", "seed": 0}

    def generate(label: str):
        def body() -> dict:
            installed: Installed = state["installed"]
            argv = [installed.python, "-m", "engine", "generate", "--model", model_dir, "--prompt-ids", SMOKE_PROMPT_IDS,
                    "--max-new-tokens", str(SMOKE_NEW_TOKENS), "--json"]
            out = host.run(argv, cwd=installed.cwd, env=installed.env, replace_env=True, timeout=timeout)
            if out.exit_code != 0:
                raise PhaseFailed("generate failed", {"exit_code": out.exit_code, "stderr_tail": out.stderr[-2000:]})
            digest, count = _output_digest(out.stdout)
            state[label] = digest
            return {"output_sha256": digest, "generated_tokens": count}
        return body

    def identical() -> dict:
        same = state["generate-1"] == state["generate-2"]
        facts = {"identical": same, "output_sha256": state["generate-1"]}
        if not same:
            facts["second_output_sha256"] = state["generate-2"]
            raise PhaseFailed("two generations of the same prompt differ", facts)
        return facts

    return [("install", install), ("identity", identity), ("tiny-model", tiny_model),
            ("generate-1", generate("generate-1")), ("generate-2", generate("generate-2")),
            ("identical-outputs", identical)]
