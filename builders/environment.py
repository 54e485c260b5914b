"""The hermetic build environment: what is fixed for every build, and the plan's variations.

Fixed for every build: SOURCE_DATE_EPOCH (the time of the last commit that changed the subdir,
builders/snapshot.py), PYTHONHASHSEED=0, no package index, and caches / TMPDIR that start empty
inside the build directory. What differs between build a and build b (build path, hostname, user
and uid, umask, TZ, locale, clock, HOME, noise) comes from a plan (builders.variations): build a is
plan "a", build b plan "b", a bisection trial one variation on "b". `BuildEnv.wrap` makes the
plan's hostname, umask, uid and clock real around the build command.

The record copies carry no machine paths: the build directory is written `${BUILD_DIR}`
(and `${WORKROOT}/...` when it lies under the work root) and PATH as `${HOST_PATH}`.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Mapping

from builders import variations

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class BuildEnv:
    label: str
    build_dir: str
    src_dir: str
    out_dir: str
    env: dict[str, str]
    plan: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    record_environment: dict = field(default_factory=dict)
    record_varied: dict = field(default_factory=dict)

    @property
    def dirs(self) -> list[str]:
        """Directories that must exist, empty, before the build starts; the last one is the
        boundary (`vcs_boundary`)."""
        return [self.out_dir, self.env["HOME"], self.env["TMPDIR"], self.env["XDG_CACHE_HOME"],
                self.env["PIP_CACHE_DIR"], self.vcs_boundary]

    @property
    def vcs_boundary(self) -> str:
        """An empty `.git` next to the source. Hatchling looks for a .gitignore from the source
        upwards until a directory holding `.git`, then applies it and ships it in the sdist: without
        this boundary a build under a checkout took that checkout's .gitignore (found when build b
        first ran in a container, where there is none). git itself skips an empty .git directory."""
        return posixpath.join(self.build_dir, ".git")

    def wrap(self, argv: list[str]) -> list[str]:
        """ARGV under this build's hostname, umask, uid and clock."""
        return variations.wrap(argv, self.plan, self.missing)


def hermetic_env(source_date_epoch: int, build_dir: str, label: str, *,
                 path: str | None = None, workroot: str | None = None, plan: Mapping[str, str] | None = None,
                 missing: Mapping[str, str] | None = None) -> BuildEnv:
    """The full environment for one build (used with replace_env=True) and its record copies.
    PLAN defaults to every variation on LABEL's side (label "b": b, any other label: a);
    MISSING names the variations the host cannot make real (variations.probe)."""
    build_dir = posixpath.normpath(build_dir)
    plan = dict(plan or variations.plan_for("b" if label == "b" else "a"))
    missing = dict(missing or {})
    cache = posixpath.join(build_dir, "cache")
    fixed = {
        "SOURCE_DATE_EPOCH": str(int(source_date_epoch)),
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_CACHE_DIR": posixpath.join(cache, "pip"),
        "XDG_CACHE_HOME": cache,
        "TMPDIR": posixpath.join(build_dir, "tmp"),
    }
    varied = variations.env_for(plan, build_dir, missing)
    env = {"PATH": path or DEFAULT_PATH, **fixed, **varied}

    shown_dir = _show_build_dir(build_dir, workroot)
    redact = {build_dir: "${BUILD_DIR}"}
    record_environment = {
        "variables": {k: _redact(v, redact) for k, v in sorted(fixed.items())} | {"PATH": "${HOST_PATH}"},
    }
    record_varied = {"build_dir": shown_dir,
                     "variables": {k: _redact(v, redact) for k, v in sorted(varied.items())},
                     "variations": variations.record(plan, missing, shown_dir)}
    return BuildEnv(label=label, build_dir=build_dir, src_dir=posixpath.join(build_dir, "src"),
                    out_dir=posixpath.join(build_dir, "out"), env=env, plan=plan, missing=missing,
                    record_environment=record_environment, record_varied=record_varied)


def _show_build_dir(build_dir: str, workroot: str | None) -> str:
    if workroot:
        root = posixpath.normpath(workroot)
        if build_dir.startswith(root + "/"):
            return "${WORKROOT}/" + build_dir[len(root) + 1:]
    return "${BUILD_DIR}"


def _redact(value: str, replacements: dict[str, str]) -> str:
    for real, shown in replacements.items():
        value = value.replace(real, shown)
    return value
