"""Executable blocks of a Markdown document: the ```bash / ```sh fenced blocks a user runs, in order.

A block whose info string carries `no-run` (e.g. ```bash no-run) is shown to the reader but not
executed. Each executable block is named by its index (0-based, counting executable blocks only),
the nearest heading above it, and the sha256 of its exact text (UTF-8, as it stands between the
fences), so that an acceptance record can bind every block and a later edit to one of them can be
named; prose and other fences change no block."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(?P<fence>```+|~~~+)\s*(?P<info>[^\n`]*)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
SHELLS = ("bash", "sh")


@dataclass(frozen=True)
class Block:
    index: int
    heading: str
    lang: str
    text: str
    sha256: str

    def record(self) -> dict:
        """What an acceptance record binds of the block (its text stays in the docs asset)."""
        return {"index": self.index, "heading": self.heading, "sha256": self.sha256}

    def name(self) -> str:
        return f'block {self.index} under "{self.heading}"'


def _lang(info: str) -> str | None:
    """The shell of an executable fence, or None (another language, or marked no-run)."""
    words = info.split()
    return words[0] if words and words[0] in SHELLS and "no-run" not in words[1:] else None


def _block(index: int, heading: str, lang: str, body: list[str]) -> Block:
    text = "".join(body)
    return Block(index, heading, lang, text, hashlib.sha256(text.encode("utf-8")).hexdigest())


def extract(text: str) -> list[Block]:
    """Every executable block of the Markdown `text`, in document order. An unclosed fence runs to
    the end of the document, as CommonMark reads it; a heading inside a fence is not a heading."""
    blocks: list[Block] = []
    heading, fence, info, body = "", None, "", []
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            m = _FENCE.match(bare)
            if m:
                fence, info, body = m.group("fence"), m.group("info").strip(), []
                continue
            h = _HEADING.match(bare)
            if h:
                heading = h.group("title")
        elif bare.strip().startswith(fence) and not bare.strip().strip(fence[0]):
            lang = _lang(info)
            if lang:
                blocks.append(_block(len(blocks), heading, lang, body))
            fence = None
        else:
            body.append(line)
    if fence is not None and _lang(info):
        blocks.append(_block(len(blocks), heading, _lang(info), body))
    return blocks


def changed_blocks(text: str, recorded: list[dict]) -> list[str]:
    """The executable blocks of `text` that differ from the `recorded` ones (index, heading,
    sha256), each named as `block <index> under "<heading>"`; empty when every block is the same."""
    now = {b.index: b for b in extract(text)}
    was = {r["index"]: r for r in recorded}
    problems = []
    for i in sorted(set(now) | set(was)):
        b, r = now.get(i), was.get(i)
        if r is None:
            problems.append(f"{b.name()} was added after acceptance")
        elif b is None:
            problems.append(f'block {i} under "{r["heading"]}" was removed after acceptance')
        elif b.sha256 != r["sha256"] or b.heading != r["heading"]:
            problems.append(f"{b.name()} differs from the accepted one")
    return problems
