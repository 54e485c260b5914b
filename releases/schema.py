"""Load and validate records against releases/schemas/<kind>.schema.json (Draft 2020-12)."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from releases.errors import SchemaError

# importlib.resources, not a filesystem path: the installer zipapp carries the schemas inside the zip.
SCHEMA_DIR = files("releases") / "schemas"
_SUFFIX = ".schema.json"


def _schema_files() -> list:
    return sorted((p for p in SCHEMA_DIR.iterdir() if p.name.endswith(_SUFFIX)), key=lambda p: p.name)


def kinds() -> list[str]:
    """Every record kind that has a schema file."""
    return [p.name[: -len(_SUFFIX)] for p in _schema_files()]


@lru_cache(maxsize=1)
def _registry() -> Registry:
    resources = []
    for path in _schema_files():
        contents = json.loads(path.read_text(encoding="utf-8"))
        # Another team's schema may omit $id; it is still reachable under the conventional URI.
        uri = contents.get("$id") or f"https://assay.dev/schemas/{path.name}"
        resources.append((uri, Resource.from_contents(contents, default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


@lru_cache(maxsize=None)
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    path = SCHEMA_DIR.joinpath(f"{kind}{_SUFFIX}")
    if not path.is_file():
        raise SchemaError(kind, "", "", f"no schema for record kind {kind!r}; known kinds: {', '.join(kinds())}")
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema,
        registry=_registry(),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


def json_pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _message(error: jsonschema.ValidationError) -> str:
    # jsonschema quotes the whole instance; a base64 payload would drown the message.
    text = error.message
    return text if len(text) <= 200 else text[:140] + " ... " + text[-50:]


def _expected(error: jsonschema.ValidationError) -> str:
    if error.validator in ("additionalProperties", "required", "if", "then", "allOf", "anyOf", "oneOf"):
        return ""
    value = json.dumps(error.validator_value, sort_keys=True)
    if len(value) > 120:
        value = value[:117] + "..."
    return f" (expected {error.validator}: {value})"


def errors(kind: str, record: Any) -> list[SchemaError]:
    """Every schema violation of `record`, deepest-first per branch, as SchemaErrors."""
    validator = _validator(kind)
    found = sorted(validator.iter_errors(record), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    out = []
    for error in found:
        leaf = jsonschema.exceptions.best_match([error])
        out.append(SchemaError(kind, "", json_pointer(leaf.absolute_path), _message(leaf) + _expected(leaf)))
    return out


def validate(kind: str, record: Any, where: str = "") -> Any:
    """Raise SchemaError naming the kind, `where`, the JSON pointer and what was expected."""
    validator = _validator(kind)
    error = jsonschema.exceptions.best_match(validator.iter_errors(record))
    if error is not None:
        # Descend into combinators so the message names the innermost key that failed.
        while error.context:
            error = jsonschema.exceptions.best_match(error.context)
        raise SchemaError(kind, where, json_pointer(error.absolute_path), _message(error) + _expected(error))
    return record
