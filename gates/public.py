"""Public records hold no host paths, prompts or outputs (ARCHITECTURE: Records). Facts are
scrubbed before they are signed: known roots become placeholders, and any remaining absolute
path under a well-known top-level folder becomes "<path>"; `host_paths` finds what is left."""

from __future__ import annotations

import re
from typing import Any, Iterable

# Absolute paths under folders where checkouts, homes and scratch live. API routes such as
# "/v1/models" are not paths and must survive, so only these roots are matched.
_ABS = re.compile(r"(?<![\w.:/])/(?:home|root|tmp|var|usr|opt|work|mnt|srv|etc|Users|private|run|data|scratch|nix|proc)"
                  r"(?:/[^\s'\"<>,;:)\]}]*)?")


def scrub_text(text: str, roots: Iterable[tuple[str, str]] = ()) -> str:
    """Replace each (root, placeholder) first, longest root first, then any other absolute path."""
    for root, placeholder in sorted(roots, key=lambda r: -len(r[0])):
        if root and root != "/":
            text = text.replace(root.rstrip("/"), placeholder)
    return _ABS.sub("<path>", text)


def scrub(obj: Any, roots: Iterable[tuple[str, str]] = ()) -> Any:
    roots = list(roots)
    if isinstance(obj, str):
        return scrub_text(obj, roots)
    if isinstance(obj, dict):
        return {k: scrub(v, roots) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v, roots) for v in obj]
    return obj


def host_paths(obj: Any, where: str = "") -> list[str]:
    """JSON pointers of strings in `obj` that still hold an absolute host path."""
    if isinstance(obj, str):
        return [where or "/"] if _ABS.search(obj) else []
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in host_paths(v, f"{where}/{k}")]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in host_paths(v, f"{where}/{i}")]
    return []
