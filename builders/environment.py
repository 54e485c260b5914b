"""The hermetic build environment, and what deliberately differs between build a and build b.

Fixed for every build: SOURCE_DATE_EPOCH (the time of the last commit that changed the subdir,
builders/snapshot.py), UTC, the C.UTF-8 locale, umask 022, PYTHONHASHSEED=0, no package index,
and HOME / caches / TMPDIR that start empty inside the build directory. Varied per label, so that a build leaking any of it into its
output is caught by the comparison: the build directory path (chosen by the caller),
USER / LOGNAME / HOSTNAME, and unrelated noise variables of different lengths.

The record copies carry no machine paths: the build directory is written `${BUILD_DIR}`
(and `${WORKROOT}/...` when it lies under the work root) and PATH as `${HOST_PATH}`.
"""
from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass, field

UMASK = "022"
LOCALE = "C.UTF-8"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class BuildEnv:
    label: str
    build_dir: str
    src_dir: str
    out_dir: str
    env: dict[str, str]
    record_environment: dict = field(default_factory=dict)
    record_varied: dict = field(default_factory=dict)

    @property
    def dirs(self) -> list[str]:
        """Directories that must exist, empty, before the build starts."""
        return [self.out_dir, self.env["HOME"], self.env["TMPDIR"], self.env["XDG_CACHE_HOME"],
                self.env["PIP_CACHE_DIR"]]


def varied_values(label: str) -> dict[str, str]:
    """Identity and noise variables that differ for every label (and are stable per label)."""
    noise = hashlib.sha256(f"assay-noise-{label}".encode()).hexdigest()
    width = 8 + int(noise[0], 16) * 3  # different lengths shift any leaked offsets
    return {
        "USER": f"assay-builder-{label}",
        "LOGNAME": f"assay-builder-{label}",
        "HOSTNAME": f"assay-build-{label}.invalid",
        "ASSAY_BUILD_LABEL": label,
        "ASSAY_ENV_NOISE": noise[:width],
        "COLUMNS": str(80 + int(noise[1:3], 16)),
    }


def hermetic_env(source_date_epoch: int, build_dir: str, label: str, *,
                 path: str | None = None, workroot: str | None = None) -> BuildEnv:
    """The full environment for one build (used with replace_env=True) and its record copies."""
    build_dir = posixpath.normpath(build_dir)
    home = posixpath.join(build_dir, "home")
    cache = posixpath.join(build_dir, "cache")
    fixed = {
        "SOURCE_DATE_EPOCH": str(int(source_date_epoch)),
        "TZ": "UTC",
        "LC_ALL": LOCALE,
        "LANG": LOCALE,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_CACHE_DIR": posixpath.join(cache, "pip"),
        "XDG_CACHE_HOME": cache,
        "HOME": home,
        "TMPDIR": posixpath.join(build_dir, "tmp"),
    }
    varied = varied_values(label)
    env = {"PATH": path or DEFAULT_PATH, **fixed, **varied}

    shown_dir = _show_build_dir(build_dir, workroot)
    redact = {build_dir: "${BUILD_DIR}"}
    record_environment = {
        "variables": {k: _redact(v, redact) for k, v in sorted(fixed.items())} | {"PATH": "${HOST_PATH}"},
        "umask": UMASK,
    }
    record_varied = {"build_dir": shown_dir, "variables": dict(sorted(varied.items()))}
    return BuildEnv(label=label, build_dir=build_dir, src_dir=posixpath.join(build_dir, "src"),
                    out_dir=posixpath.join(build_dir, "out"), env=env,
                    record_environment=record_environment, record_varied=record_varied)


def umask_wrap(argv: list[str]) -> list[str]:
    """ARGV run under umask 022 without a shell parsing any of it."""
    return ["sh", "-c", f'umask {UMASK}; exec "$@"', "sh", *argv]


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
