"""The notes as a small document tree that both the Markdown and the HTML writers render.

A run of inline parts is a list of: str (text the notes write), Code (a key or identifier from a
record, not a figure) and Fig (a value from a record, always printed as a link to its source).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from releases.notes.source import Fig


@dataclass(frozen=True)
class Code:
    text: str


Part = Union[str, Code, Fig]
Inline = list  # list[Part]


@dataclass
class Heading:
    level: int
    parts: Inline


@dataclass
class Para:
    parts: Inline


@dataclass
class Bullets:
    items: list  # list[Inline]


@dataclass
class Table:
    header: list  # list[str]
    rows: list = field(default_factory=list)  # list[list[Inline]]


@dataclass
class Chart:
    """An SVG chart; only the HTML notes carry it."""

    title: str
    svg: str


def inline(*parts: Part) -> Inline:
    return [p for p in parts if p != ""]


def joined(parts: list[Part], sep: str = ", ") -> Inline:
    out: Inline = []
    for n, p in enumerate(parts):
        if n:
            out.append(sep)
        out.append(p)
    return out
