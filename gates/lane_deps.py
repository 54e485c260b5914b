"""What a lane host's interpreter must already hold: the engine wheel installs with `--no-deps`
into a venv that reuses that interpreter's packages (gates/install.py), and some phases' probes
import a package of their own there. preflight checks them before any phase starts an engine, so
a host that lacks one is named at once, not after minutes of phases.

Checked by distribution metadata on the host (importlib.metadata), never by importing: importing
torch alone costs seconds, and preflight reads facts only. Each requirement's own requirements are
followed too, with their version ranges, where `packaging` (or pip's copy of it) is there to read
them; without it, only the top-level names are checked. An unmet top-level requirement stops the
lane, and so does one further down that is not installed at all: a package without one it
requires fails at import (a fastapi without its telemetry package, an openai client without its
HTTP library), which would end a phase failed and blame the candidate for its host. A version
further down outside its range is reported only: a GPU host's image often declares pins it does
not keep (what `pip check` lists) and runs well, so the report says where to look if an engine
then does not."""

from __future__ import annotations

import json
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from gates.install import clean_env

# Phases whose probes import a package beyond the engine's own dependencies.
PROBE_NEEDS: dict[str, tuple[str, ...]] = {
    "client-turn": ("openai",),      # the official client, as a user's application drives the engine
}
# Phases that start no engine: a chain of only these needs none of the engine's dependencies.
NO_ENGINE = frozenset({"preflight", "install", "restore"})
NOT_INSTALLED = " (not installed)"   # as _CHECK words it

_CHECK = r"""
import json, re, sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        Requirement = None
missing, seen = [], set()
todo = [(line, "") for line in json.loads(sys.argv[1])]
while todo:
    line, via = todo.pop(0)
    if Requirement is None:
        name, spec, marker, extras = re.match(r"[A-Za-z0-9._-]+", line).group(0), None, None, ()
    else:
        req = Requirement(line)
        name, spec, marker, extras = req.name, req.specifier, req.marker, tuple(sorted(req.extras))
    if marker is not None and not marker.evaluate({"extra": ""}):
        continue
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        missing.append(via + line + " (not installed)")
        continue
    if spec and not spec.contains(version, prereleases=True):
        missing.append(via + line + " (has " + version + ")")
        continue
    key = (re.sub(r"[-_.]+", "-", name).lower(), extras)
    if Requirement is None or key in seen:
        continue
    seen.add(key)
    for sub in metadata.requires(name) or []:
        r = Requirement(sub)
        if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("",) + extras):
            todo.append((str(r).split(";")[0].strip(), via + name + " -> "))
print(json.dumps(missing))
"""


class WheelMetadataError(ValueError):
    """The wheel's METADATA could not be read; names the wheel and why."""


def wheel_requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines of WHEEL's METADATA, in order. (builders.wheel_meta reads the same
    for the SBOMs, but gates may not import builders: shared ARCHITECTURE.md.)"""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise WheelMetadataError(f"{Path(wheel).name}: expected one *.dist-info/METADATA, found {len(names)}")
            text = zf.read(names[0]).decode("utf-8")
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as error:
        raise WheelMetadataError(f"{Path(wheel).name}: cannot read its METADATA: {error}") from None
    return list(HeaderParser().parsestr(text).get_all("Requires-Dist") or [])


def needed(wheel: Path, chain) -> dict[str, list[str]]:
    """{who needs it: [requirement, ...]} for a lane running CHAIN with WHEEL."""
    out: dict[str, list[str]] = {}
    if any(phase not in NO_ENGINE for phase in chain):
        out["engine wheel"] = wheel_requirements(wheel)
    for phase in chain:
        if PROBE_NEEDS.get(phase):
            out[phase] = list(PROBE_NEEDS[phase])
    return out


def missing_on_host(host, python: str, requirements: dict[str, list[str]]) -> tuple[dict, dict]:
    """What PYTHON on HOST does not satisfy, by who needs it: (what stops the lane: the
    requirements themselves, and any of their own requirements not installed at all, as
    "dist -> requirement (not installed)"; what is only reported: their own requirements installed
    at a version outside the range, "dist -> requirement (has V)"); both empty when all are met.

    PYTHON is asked in the environment the lane's commands get (gates.install.clean_env) and
    without the user's site-packages (-s), as the lane's venv sees it: packages that only
    PYTHONPATH or ~/.local made visible to whoever started the lane never reach the engine."""
    direct, below = {}, {}
    for who, reqs in requirements.items():
        if not reqs:
            continue
        out = host.run([python, "-s", "-c", _CHECK, json.dumps(reqs)], env=clean_env("/"), replace_env=True,
                       timeout=120)
        for line in json.loads(out.check().stdout):
            below_only = " -> " in line and not line.endswith(NOT_INSTALLED)
            (below if below_only else direct).setdefault(who, []).append(line)
    return direct, below
