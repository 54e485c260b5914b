"""assay.toml: the one configuration file, validated against config.schema.json at load."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from hosts.toml_input import pointer, read_toml, short

_HERE = Path(__file__).parent
DEFAULTS = _HERE / "defaults.toml"
SCHEMA = _HERE / "config.schema.json"


class ConfigError(Exception):
    """A configuration file is unreadable or does not match the schema."""

    def __init__(self, file: str, key_path: str, message: str):
        self.file, self.key_path, self.message = file, key_path, message
        super().__init__(f"{file}: {key_path or '<root>'}: {message}")


def project_root() -> Path:
    """The repository root: ASSAY_ROOT, else the folder holding this project's pyproject.toml."""
    env = os.environ.get("ASSAY_ROOT")
    if env:
        return Path(env).resolve()
    return _HERE.parent.resolve()


@dataclass(frozen=True)
class Lane:
    name: str
    kind: str
    host: str
    model: str | None = None
    gpu: str | None = None
    lease_path: str | None = None
    python: str | None = None
    gates: dict[str, Any] | None = None  # [lanes.gates.*]: judged-gate settings (gates.judged.resolve)
    qualify: dict[str, Any] | None = None  # [lanes.qualify]: phase-chain settings (gates.spec)
    work_pool: str | None = None  # a Prefect work pool: the lane runs on a worker there (flows/dispatch.py)
    dispatch_timeout_s: int = 3600  # how long a dispatched lane may take, queued and running


@dataclass(frozen=True)
class Config:
    file: str
    root: Path
    raw: dict[str, Any]

    @property
    def release_name(self) -> str:
        return self.raw["release"]["name"]

    @property
    def source(self) -> Path:
        return self._path(self.raw["release"]["source"])

    @property
    def subdir(self) -> str:
        return self.raw["release"]["subdir"]

    @property
    def version_label(self) -> str:
        """How a clean candidate's release version is labelled (builders.snapshot.freeze)."""
        return self.raw["release"].get("version_label", "commit")

    @property
    def private_markers(self) -> list[str]:
        """[release].private_markers: strings no public record or artifact member may hold."""
        return list(self.raw["release"].get("private_markers", []))

    @property
    def source_uri(self) -> str | None:
        """The configured repository URI for the provenance (None: builders.provenance.repository_uri
        asks git for the origin remote)."""
        return self.raw["release"].get("source_uri")

    @property
    def approvers(self) -> list[str]:
        return list(self.approver_keys)

    @property
    def approver_keys(self) -> dict[str, str | None]:
        """name -> public key PEM; None for a name listed without a key (it can approve only unsigned)."""
        listed = self.raw["release"]["approvers"]
        if isinstance(listed, list):
            return {name: None for name in listed}
        return {name: entry["public_key"] for name, entry in listed.items()}

    @property
    def waiver_grantors(self) -> dict[str, str]:
        """name -> public key PEM of the people who may grant (sign) gate waivers."""
        return {name: entry["public_key"] for name, entry in self.raw["release"].get("waiver_grantors", {}).items()}

    @property
    def allow_unsigned_approval(self) -> bool:
        return bool(self.raw["release"].get("allow_unsigned_approval", False))

    @property
    def approval_timeout_s(self) -> int:
        return int(self.raw["release"].get("approval_timeout_s", 3600))

    @property
    def approval_poll_s(self) -> int:
        return int(self.raw["release"].get("approval_poll_s", 5))

    @property
    def review_ledger(self) -> Path | None:
        """The reviewers' ledger file ([review].ledger), or None when nobody supplied one."""
        path = self.raw.get("review", {}).get("ledger")
        return self._path(path) if path else None

    @property
    def state_dir(self) -> Path:
        return self._path(self.raw.get("paths", {}).get("state", ".assay"))

    @property
    def keys_dir(self) -> Path:
        return self.state_dir / "keys"

    @property
    def work_dir(self) -> Path:
        return self.state_dir / "work"

    @property
    def inventory(self) -> Path | None:
        inv = self.raw.get("inventory")
        return self._path(inv) if inv else None

    @property
    def store(self) -> dict[str, Any]:
        store = dict(self.raw["store"])
        if store["kind"] == "filesystem":
            store["path"] = str(self._path(store["path"]))
        return store

    @property
    def incumbent(self) -> dict[str, Any]:
        """[incumbent]: {"ref": ...} or {"wheel": absolute path}, used when the store has no release."""
        inc = dict(self.raw.get("incumbent", {}))
        if inc.get("wheel"):
            inc["wheel"] = str(self._path(inc["wheel"]))
        return inc

    @property
    def build_hosts(self) -> list[str]:
        return list(self.raw["build"]["hosts"])

    @property
    def build_pythons(self) -> list[str | None]:
        return list(self.raw["build"].get("python", [None, None]))

    @property
    def build_timeout_s(self) -> int:
        return int(self.raw["build"].get("timeout_s", 1200))

    @property
    def lanes(self) -> list[Lane]:
        lanes = []
        for lane in self.raw["lanes"]:
            lane = dict(lane)
            if lane.get("model") and lane["host"] == "local":
                lane["model"] = str(self._path(lane["model"]))
            lanes.append(Lane(**lane))
        return lanes

    def lane(self, name: str) -> Lane:
        for lane in self.lanes:
            if lane.name == name:
                return lane
        raise ConfigError(self.file, "lanes", f"no lane named {name!r}; known: {[l.name for l in self.lanes]}")

    def lane_spec(self, name: str):
        """The lane as gates reads it (gates.spec.LaneSpec), validated by gates' own lane schema;
        relative paths resolve against this config's root, local leases live under the state dir."""
        from gates.spec import LaneSpecError, spec_from_table

        for i, table in enumerate(self.raw["lanes"]):
            if table["name"] == name:
                try:
                    return spec_from_table(lane_table(table), file=self.file,
                                           where=f"/lanes/{i}", base=self.root, state_root=str(self.state_dir))
                except LaneSpecError as exc:
                    raise ConfigError(exc.file, exc.key_path, exc.message) from None
        raise ConfigError(self.file, "lanes", f"no lane named {name!r}; known: {[l.name for l in self.lanes]}")

    def lane_table(self, name: str) -> dict[str, Any]:
        """The lane's table as gates reads it (what a worker on the lane host is sent)."""
        for table in self.raw["lanes"]:
            if table["name"] == name:
                return lane_table(table)
        raise ConfigError(self.file, "lanes", f"no lane named {name!r}; known: {[l.name for l in self.lanes]}")

    def _path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else (self.root / path).resolve()


# Keys of a [[lanes]] table that flows reads and gates does not (gates' lane schema refuses them).
FLOW_ONLY_LANE_KEYS = ("gates", "work_pool", "dispatch_timeout_s")


def lane_table(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k not in FLOW_ONLY_LANE_KEYS}


def validate_config(raw: dict[str, Any], file: str) -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        first = errors[0]
        raise ConfigError(file, pointer(first.absolute_path),
                          short(f"{first.message} (expected by schema rule {first.validator!r})"))


def load_config(path: str | os.PathLike[str] | None = None, root: Path | None = None) -> Config:
    """Load assay.toml (or the embedded defaults when path is None) and validate it. Any problem
    with the file, whatever it holds, is a ConfigError naming the file, the key path and what was
    expected."""
    file = Path(path) if path else DEFAULTS
    label = str(path) if path else "embedded defaults (flows/defaults.toml)"
    raw = read_toml(file, lambda key_path, message: ConfigError(label, key_path, message))
    validate_config(raw, label)
    base = root or (project_root() if path is None else file.resolve().parent)
    return Config(file=label, root=base, raw=raw)
