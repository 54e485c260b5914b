"""HTML writer: one self-contained page; a figure is `<a class="fig" href="file#pointer">`."""
from __future__ import annotations

from html import escape

from releases.notes.doc import Bullets, Chart, Code, Heading, Para, Table
from releases.notes.source import Fig

_STYLE = """body{font-family:system-ui,sans-serif;max-width:72em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
a.fig{color:#0645ad;text-decoration:none;font-variant-numeric:tabular-nums}a.fig:hover{text-decoration:underline}
code{background:#f3f3f3;padding:0 .2em}figure{margin:1em 0}figcaption{font-size:.9em;color:#555}
svg text{font-family:system-ui,sans-serif;font-size:11px}"""


def _part(p) -> str:
    if isinstance(p, Fig):
        return f'<a class="fig" href="{escape(p.href)}">{escape(p.text)}</a>'
    if isinstance(p, Code):
        return f"<code>{escape(p.text)}</code>"
    return escape(p)


def _inline(parts) -> str:
    return "".join(_part(p) for p in parts)


def write(blocks: list, title: str) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{escape(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{_inline(b.parts)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{_inline(b.parts)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in b.items) + "</ul>")
        elif isinstance(b, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in b.header) + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>" for row in b.rows]
            out.append("</tbody></table>")
        elif isinstance(b, Chart):
            out.append(f"<figure>{b.svg}<figcaption>{escape(b.title)}</figcaption></figure>")
        else:
            raise TypeError(f"unknown block {type(b).__name__}")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
