"""Typed errors of the GGUF importer."""
from __future__ import annotations


class GGUFError(ValueError):
    """A GGUF file that cannot be read: names the file and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnsupportedGGUFError(GGUFError):
    """A well-formed GGUF that uses an architecture, tokenizer or tensor type we do not import."""

    def __init__(self, path: str, what: str, items: list[str], supported: list[str]):
        self.what = what
        self.items = sorted(items)
        self.supported = sorted(supported)
        super().__init__(path, f"unsupported {what}: {', '.join(self.items)} "
                               f"(supported: {', '.join(self.supported)})")
