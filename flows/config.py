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
    evidence: str | None = None  # a folder of lane evidence (absolute): bound by wheel digest, never run here
    public_key: str | None = None  # the lane host's pinned public key (PEM), from public_key or public_key_file
    acceptance: bool = False  # run the acceptance window on this lane's host (flows/acceptance_steps.py)
    acceptance_max_hold_s: float | None = None  # how long that window may hold the host (default 1800 s)
    acceptance_incumbent_prefix: str | None = None  # where the serving release is installed on that host
    optional: bool = False  # a hardware-pending lane does not keep the release from ready (it is disclosed)


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
    def kernel_archs(self) -> tuple[int, ...] | None:
        """The GPU archs the AOT kernels step compiles for; None: the source's own list."""
        archs = self.raw["build"].get("kernel_archs")
        return tuple(archs) if archs else None

    @property
    def build_image(self) -> bool:
        """Whether each build also makes the engine's OCI image (builders.oci_image)."""
        return bool(self.raw["build"].get("image", False))

    @property
    def lanes(self) -> list[Lane]:
        lanes = []
        for i, lane in enumerate(self.raw["lanes"]):
            lane = dict(lane)
            if lane.get("model") and lane["host"] == "local":
                lane["model"] = str(self._path(lane["model"]))
            if lane.get("evidence"):
                lane["evidence"] = str(self._path(lane["evidence"]))
            if lane.get("public_key_file"):
                lane["public_key"] = self._read_key(self._path(lane.pop("public_key_file")), f"lanes/{i}/public_key_file")
            elif lane.get("public_key"):
                lane["public_key"] = self._read_key(lane["public_key"], f"lanes/{i}/public_key")
            lanes.append(Lane(**lane))
        return lanes

    @property
    def lane_keys(self) -> dict[str, str]:
        """lane name -> its pinned public key (PEM), for the lanes that pin one (keys/signers.json)."""
        return {lane.name: lane.public_key for lane in self.lanes if lane.public_key}

    @property
    def evidence_dir(self) -> Path:
        """Where `assay lanes import` keeps verified evidence: <state>/evidence/<lane>/<wheel sha256>/."""
        return self.state_dir / "evidence"

    def _read_key(self, value: str | Path, key_path: str) -> str:
        """A public key (PEM text, or a file) as PEM text, checked to be Ed25519; else ConfigError."""
        from releases.errors import KeyFileError
        from releases.keys import load_public_key, public_pem

        try:
            return public_pem(load_public_key(value)).decode("ascii")
        except KeyFileError as exc:
            raise ConfigError(self.file, key_path, str(exc)) from None

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
FLOW_ONLY_LANE_KEYS = ("gates", "work_pool", "dispatch_timeout_s", "evidence", "public_key", "public_key_file",
                       "optional", "acceptance", "acceptance_max_hold_s", "acceptance_incumbent_prefix")


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
    for i, lane in enumerate(raw["lanes"]):
        _check_lane_keys(lane, file, f"/lanes/{i}")
        _check_acceptance_host(lane, raw, file, f"/lanes/{i}")


def _check_lane_keys(lane: dict[str, Any], file: str, where: str) -> None:
    """The combinations the schema cannot word clearly: an evidence lane pins its host's key (one
    way), a pinned key belongs to a lane that runs elsewhere, evidence is never dispatched."""
    pinned = [k for k in ("public_key", "public_key_file") if k in lane]
    if len(pinned) == 2:
        raise ConfigError(file, f"{where}/public_key_file", "give public_key or public_key_file, not both")
    if "evidence" in lane and not pinned:
        raise ConfigError(file, f"{where}/evidence", "an evidence lane needs its host's public key: public_key "
                          "(PEM) or public_key_file (docs/LANES.md, Lane evidence)")
    if "evidence" in lane and "work_pool" in lane:
        raise ConfigError(file, f"{where}/work_pool", "an evidence lane is not run here, so it is not dispatched "
                          "either: give evidence or work_pool, not both")
    if pinned and "evidence" not in lane and "work_pool" not in lane:
        raise ConfigError(file, f"{where}/{pinned[0]}", "a lane run in place signs as the pipeline (the release "
                          "key); a pinned lane key needs evidence or work_pool")


def _check_acceptance_host(lane: dict[str, Any], raw: dict[str, Any], file: str, where: str) -> None:
    """The acceptance window runs from the release run itself, on the lane's host (gates/acceptance.py):
    that host must be one the run reaches, `local` or an inventory host. Said at load time, not after
    the builds and lanes have run."""
    if not lane.get("acceptance"):
        return
    for key in ("work_pool", "evidence"):
        if key in lane:
            raise ConfigError(file, f"{where}/acceptance", f"a lane with {key} runs elsewhere, and the acceptance "
                              "window runs from this run on the lane's host: set acceptance on a lane run in "
                              "place (its host `local` or an inventory host)")
    if lane.get("host", "local") != "local" and "inventory" not in raw:
        raise ConfigError(file, f"{where}/acceptance", f"the acceptance window runs on host {lane['host']!r}, "
                          "which needs an inventory (set `inventory`)")


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
