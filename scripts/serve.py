"""`make serve`: the reference model on the CPU behind an API key, as a user's first step.

The key is made once (0600) under the state directory and its path printed; the server is the
engine's own `python -m engine serve` with the shipped reference profile, so what a user tries
here is what the lanes qualify."""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".assay" / "models" / "smollm2-135m-instruct"
KEY = ROOT / ".assay" / "serve" / "api-key"
PROFILE = ROOT / "engine" / "profiles" / "reference-cpu.json"


def ensure_key(path: Path) -> None:
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")


def main() -> int:
    port = os.environ.get("PORT", "8000")
    if not (MODEL / "config.json").is_file():
        print(f"error: the reference model is not imported at {MODEL.relative_to(ROOT)}; run `make model`",
              file=sys.stderr)
        return 2
    ensure_key(KEY)
    rel = KEY.relative_to(ROOT)
    print(f"serving {MODEL.name} on http://127.0.0.1:{port}/v1 (Ctrl-C stops it)")
    print(f"API key file: {rel}")
    print(f"try: curl -s http://127.0.0.1:{port}/v1/chat/completions -H \"Authorization: Bearer $(cat {rel})\" "
          "-H 'Content-Type: application/json' -d '{\"model\": \"smollm2-135m-instruct\", "
          "\"messages\": [{\"role\": \"user\", \"content\": \"Name a colour.\"}]}'", flush=True)
    argv = [sys.executable, "-m", "engine", "serve", "--profile", str(PROFILE), "--model", str(MODEL),
            "--api-key-file", str(KEY), "--port", port]
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    sys.exit(main())
