"""Serving profiles: a JSON file validated by profile.schema.json, defaults filled in."""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from engine.digests import canonical_json

SCHEMA_PATH = Path(__file__).with_name("profile.schema.json")

DEFAULTS: dict[str, Any] = {
    "model": {"path": None, "sha256": None, "name": "assay-engine"},
    "device": "auto",
    "dtype": "auto",
    "kv_dtype": "auto",
    "max_context": 2048,
    "kv_capacity": "auto",
    "block_size": 16,
    "prefill_chunk": "auto",        # the engine's default on the device (engine.runtime.prefill_chunk)
    "max_concurrency": 8,
    "max_pending_requests": 64,
    "pending_timeout_ms": 30000,
    "max_request_bytes": 1048576,
    "unknown_parameters": "strict",
    "speculative": {"backend": "none", "draft_tokens": 7},
    "admission_headroom_mib": 256,
    "host_memory_mib": 4096,
    "checkpoints": {"directory": None, "quota_mib": 1024, "require_origin_auth": False,
                    "auto_save_min_tokens": 256},
    "response_store": {"max_responses": 1000, "max_mib": 64},
    "listen": {"host": "127.0.0.1", "port": 8000},
    "api_key_file": None,
    "request_log": None,
    "shutdown_timeout_s": 30,
}

# Keys that say where this instance runs, not what it computes: left out of the profile's
# identity digest so that a restart on another port or log path keeps its checkpoints valid.
_DEPLOYMENT_KEYS = ("listen", "api_key_file", "request_log")


class ProfileError(ValueError):
    """A profile that cannot be used; names the file, the key path and what was expected."""

    def __init__(self, path: str, where: str, message: str):
        super().__init__(f"{path}: {where or '/'}: {message}")
        self.path, self.where, self.message = path, where, message


@dataclass(frozen=True)
class Profile:
    data: dict[str, Any]        # effective profile: defaults + file + overrides, paths absolute
    source: str                 # the file it came from

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def identity_sha256(self) -> str:
        """sha256 of the canonical JSON of the profile without deployment keys or model path."""
        body = {k: v for k, v in self.data.items() if k not in _DEPLOYMENT_KEYS}
        body["model"] = {k: v for k, v in body["model"].items() if k != "path"}
        return hashlib.sha256(canonical_json(body)).hexdigest()


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def validate_profile(data: Any, path: str = "<profile>") -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data),
                    key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/" + "/".join(str(p) for p in e.absolute_path)
        raise ProfileError(path, where, e.message)


def load_profile(path: str | Path, *, host: str | None = None, port: int | None = None,
                 model: str | None = None, api_key_file: str | None = None) -> Profile:
    """Read and validate a profile; command-line overrides win; relative paths resolve
    against the profile file's folder (overrides against the working directory)."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(str(p), "", "file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProfileError(str(p), "", f"not valid JSON: {e}") from None
    validate_profile(raw, str(p))
    data = _merge(DEFAULTS, raw)
    base = p.resolve().parent

    def resolve(value: str | None) -> str | None:
        return None if value is None else str((base / value).resolve())

    if model is None and not data["model"].get("path"):
        raise ProfileError(str(p), "/model/path", "no model directory: set it here or give --model")
    data["model"]["path"] = str(Path(model).resolve()) if model else resolve(data["model"]["path"])
    data["api_key_file"] = (str(Path(api_key_file).resolve()) if api_key_file
                            else resolve(data["api_key_file"]))
    data["request_log"] = resolve(data["request_log"])
    data["checkpoints"]["directory"] = resolve(data["checkpoints"]["directory"])
    if host is not None:
        data["listen"]["host"] = host
    if port is not None:
        data["listen"]["port"] = port
    validate_profile(data, str(p))
    if data["checkpoints"]["require_origin_auth"] and not data["api_key_file"]:
        raise ProfileError(str(p), "/checkpoints/require_origin_auth",
                           "origin authentication needs api_key_file")
    return Profile(data=data, source=str(p))
