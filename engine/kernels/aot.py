"""The engine's entry to AOT kernels, safe to import without Triton: install an artifact, report status.

engine.kernels.aot_build makes the artifact at build time; engine.kernels.aot_cache serves it
to Triton. The server (--kernels) and `engine generate` (--kernels) call `use` before the first
kernel compiles; ENGINE_KERNELS_ARTIFACT names the artifact when no option does.
"""
from __future__ import annotations

import os

ENV_ARTIFACT = "ENGINE_KERNELS_ARTIFACT"


class KernelsUnavailable(RuntimeError):
    """A kernels artifact was asked for and cannot be used; says why."""


def use(artifact: str | None = None) -> None:
    """Shipped kernels first, JIT on a miss; without an artifact, Triton's own cache with counting."""
    from engine.kernels.ops import triton_version
    chosen = artifact or os.environ.get(ENV_ARTIFACT) or None
    if triton_version() is None:
        if chosen:
            raise KernelsUnavailable(f"kernels artifact {chosen} was given (--kernels or {ENV_ARTIFACT}) "
                                     "but Triton does not import here")
        return
    from engine.kernels.aot_cache import KernelsArtifactError, install
    try:
        install(chosen)
    except KernelsArtifactError as e:
        raise KernelsUnavailable(str(e)) from None


def status() -> dict | None:
    """engine.kernels.aot_cache.status(), or None where Triton does not import."""
    from engine.kernels.ops import triton_version
    if triton_version() is None:
        return None
    from engine.kernels.aot_cache import status as cache_status
    return cache_status()
