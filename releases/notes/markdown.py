"""Markdown writer: a figure is `[value](file#pointer)`; tables are GitHub tables."""
from __future__ import annotations

import re

from releases.notes.doc import Bullets, Chart, Code, Heading, Para, Table
from releases.notes.source import Fig

# CommonMark lets a backslash escape any ASCII punctuation; these are the ones that would
# end a link text or a table cell, or start emphasis, code or raw HTML.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~!])")


def escape(text: str) -> str:
    """Escape Markdown punctuation; a newline inside a value is written `<br>` (a table row is
    one line)."""
    return _SPECIAL.sub(r"\\\1", text).replace("\r\n", "\n").replace("\n", "<br>")


def _part(p) -> str:
    if isinstance(p, Fig):
        return f"[{escape(p.text)}]({p.href})"
    if isinstance(p, Code):
        ticks = "``" if "`" in p.text else "`"
        pad = " " if ticks == "``" else ""
        return f"{ticks}{pad}{p.text}{pad}{ticks}"
    return p


def _inline(parts) -> str:
    return "".join(_part(p) for p in parts)


def write(blocks: list) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + _inline(b.parts), ""]
        elif isinstance(b, Para):
            out += [_inline(b.parts), ""]
        elif isinstance(b, Bullets):
            out += [f"- {_inline(item)}" for item in b.items] + [""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(b.header) + " |")
            out.append("|" + "---|" * len(b.header))
            out += ["| " + " | ".join(_inline(cell) for cell in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Chart):
            continue  # charts are SVG: the HTML notes carry them
        else:
            raise TypeError(f"unknown block {type(b).__name__}")
    return "\n".join(out).rstrip("\n") + "\n"
