"""A lane's specification: its `[[lanes]]` entry of assay.toml, read with tomllib and validated
with gates' own schema (lane_spec.schema.json), or the same object given as a JSON file.

gates never imports flows: this module reads the TOML itself. Relative paths (the model) resolve
against the config file's folder, as flows/config.py resolves them."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from gates.kinds import LaneKind, chain_for, kind_of

SCHEMA = Path(__file__).with_name("lane_spec.schema.json")

# The lanes `make run` qualifies when no assay.toml is given (flows/defaults.toml holds the same).
DEFAULT_LANES = [
    {"name": "cpu-smoke", "kind": "cpu-smoke", "host": "local"},
    {"name": "cpu-reference", "kind": "cpu-reference", "host": "local", "model": ".assay/models/smollm2-135m-instruct"},
]


class LaneSpecError(Exception):
    """A lane table that cannot be used: names the file, the key path and what was expected."""

    def __init__(self, file: str, key_path: str, message: str):
        self.file, self.key_path, self.message = file, key_path, message
        super().__init__(f"{file}: {key_path or '<root>'}: {message}")


@dataclass(frozen=True)
class LaneSpec:
    name: str
    kind: str
    host: str
    model: str | None = None
    python: str | None = None
    lease_path: str | None = None
    gpu: str | None = None
    workdir: str | None = None
    phases: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    state_root: str | None = None   # the config's `paths.state`, resolved (local lanes keep their lease there)

    @property
    def lane_kind(self) -> LaneKind:
        return kind_of(self.kind)

    def setting(self, key: str) -> Any:
        return self.settings[key] if key in self.settings else self.lane_kind.defaults()[key]

    @property
    def chain(self) -> tuple[str, ...]:
        return chain_for(self.lane_kind, self.phases or None)


def _pointer(path) -> str:
    return "/" + "/".join(str(p) for p in path) if path else ""


def spec_from_table(table: dict[str, Any], *, file: str, where: str, base: Path, state_root: str | None = None) -> LaneSpec:
    """Validate one lane table and build its spec; `where` is the table's key path in the file."""
    errors = sorted(jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).iter_errors(table),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        e = errors[0]
        raise LaneSpecError(file, where + _pointer(e.absolute_path), f"{e.message} (expected by schema rule {e.validator!r})")
    q = dict(table.get("qualify", {}))
    model = table.get("model")
    if model and table["host"] == "local" and not Path(model).is_absolute():
        model = str((base / model).resolve())
    if table["kind"] != "cpu-smoke" and not model:
        raise LaneSpecError(file, f"{where}/model", f"lane kind {table['kind']!r} needs `model` (a model directory on the host)")
    phases = tuple(q.pop("phases", ()))
    return LaneSpec(name=table["name"], kind=table["kind"], host=table["host"], model=model,
                    python=table.get("python"), lease_path=table.get("lease_path"), gpu=table.get("gpu"),
                    workdir=q.pop("workdir", None), phases=phases, settings=q, state_root=state_root)


def load_lane(name: str, config: str | Path | None = None) -> LaneSpec:
    """The lane `name` from assay.toml (`config`), or from the built-in default lanes."""
    if config is None:
        tables, file, base, state = DEFAULT_LANES, "built-in default lanes", Path.cwd(), str(Path.cwd() / ".assay")
    else:
        path = Path(config)
        file = str(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LaneSpecError(file, "", "file not found") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise LaneSpecError(file, "", f"not valid TOML: {exc}") from None
        tables = raw.get("lanes")
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise LaneSpecError(file, "/lanes", "expected an array of [[lanes]] tables")
        base = path.resolve().parent
        state_value = raw.get("paths", {}).get("state", ".assay") if isinstance(raw.get("paths"), dict) else ".assay"
        state = str((base / state_value).resolve())
    for i, table in enumerate(tables):
        if table.get("name") == name:
            return spec_from_table(table, file=file, where=f"/lanes/{i}", base=base, state_root=state)
    known = [t.get("name") for t in tables]
    raise LaneSpecError(file, "/lanes", f"no lane named {name!r}; known: {known}")


def load_lane_json(path: str | Path) -> LaneSpec:
    """A lane spec given as one JSON object (the same keys as a [[lanes]] table)."""
    path = Path(path)
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LaneSpecError(str(path), "", "file not found") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise LaneSpecError(str(path), "", f"not valid JSON: {exc}") from None
    if not isinstance(table, dict):
        raise LaneSpecError(str(path), "", "expected a JSON object")
    return spec_from_table(table, file=str(path), where="", base=path.resolve().parent)
