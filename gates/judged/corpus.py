"""The committed corpora: loaded, checked, selected by size, and sealed by digests.

Prompts live only here (committed, public test material); records carry the corpus file's
sha256 and a membership digest over exactly the prompts run, never a prompt or an output.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from releases.canonical import digest, file_sha256

from gates.judged.errors import CorpusError

CORPORA = Path(__file__).resolve().parent / "corpora"
ABBA = CORPORA / "abba.json"
QUALITY = CORPORA / "quality.json"

# Filler for ABBA prompts: plain sentences with distinct numbers, so no two prompts share text
# by accident and a tokenizer sees ordinary words.
_WORDS = ("the inspector logged valve {n} in bay {b} at pressure {p} before the morning shift "
          "and noted that its seal looked {s}").split()
_STATES = ("sound", "worn", "new", "dry", "oily", "cracked")


@lru_cache(maxsize=None)
def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(path.name, f"cannot read: {exc}") from exc


def abba_cases(size: str, only: list[str] | None = None) -> list[dict]:
    """The ABBA cases of a size, or exactly the ids in `only` (each must exist)."""
    cases = _load(ABBA)["cases"]
    if only is not None:
        known = {c["id"]: c for c in cases}
        missing = [c for c in only if c not in known]
        if missing:
            raise CorpusError(ABBA.name, f"no case(s) {', '.join(missing)}; known: {', '.join(known)}")
        return [known[c] for c in only]
    return [c for c in cases if size in c["sizes"]]


def filler(words: int, salt: str) -> str:
    """`words` words of deterministic text, different for every salt."""
    seed = int.from_bytes(hashlib.sha256(salt.encode()).digest()[:4], "big")
    out: list[str] = []
    i = 0
    while len(out) < words:
        n = seed + i
        sentence = " ".join(_WORDS).format(n=n % 997, b=n % 7 + 1, p=(n * 37) % 500, s=_STATES[n % 6])
        out += sentence.split() + ["."]
        i += 1
    return " ".join(out[:words])


def quality() -> dict:
    return _load(QUALITY)


def quality_pairs(cases: int, variants: int) -> list[tuple[dict, dict]]:
    """The first `cases` cases, each with its first `variants` variants."""
    data = quality()
    if cases > len(data["cases"]) or variants > len(data["variants"]):
        raise CorpusError(QUALITY.name, f"{cases} x {variants} asked; the corpus has "
                                        f"{len(data['cases'])} x {len(data['variants'])}")
    return [(c, v) for c in data["cases"][:cases] for v in c["variants"][:variants]]


def determinism_prompts(n: int) -> list[tuple[str, list[dict]]]:
    """N prompts for the determinism rerun: the base variant of the first N quality cases."""
    cases = quality()["cases"]
    if n > len(cases):
        raise CorpusError(QUALITY.name, f"{n} determinism prompts asked; the corpus has {len(cases)}")
    return [(c["id"], c["variants"][0]["messages"]) for c in cases[:n]]


def corpus_sha256(path: Path) -> str:
    return file_sha256(path)


def membership(items: list[tuple[str, object]]) -> str:
    """Digest sealing which prompts ran: sha256 of the canonical list of [id, sha256 of the prompt]."""
    return digest([[ident, digest(prompt)] for ident, prompt in items])
