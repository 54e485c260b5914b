"""Deterministic SVG charts for the HTML notes, written by hand: coordinates rounded to one
decimal, no ids, no timestamps. Every label that prints a value is a linked Fig, like the text."""
from __future__ import annotations

from datetime import datetime
from html import escape

from releases.notes.doc import Chart
from releases.notes.source import Fig, Release

WIDTH, LEFT, RIGHT = 720, 180, 560  # plot area between LEFT and RIGHT; labels to the right of it
ROW = 22
COLORS = {"pass": "#3a8a5c", "below_floor": "#c0392b", "fail": "#c0392b", "waived": "#d68910",
          "incomplete": "#999999", "inconclusive": "#999999", "skipped": "#bbbbbb"}


def _n(x: float) -> str:
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def _label(fig: Fig, x: float, y: float, anchor: str = "start") -> str:
    return (f'<a href="{escape(fig.href)}"><text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}">'
            f"{escape(fig.text)}</text></a>")


def _text(text: str, x: float, y: float, anchor: str = "start") -> str:
    return f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}">{escape(text)}</text>'


def _svg(height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{_n(height)}" '
            f'viewBox="0 0 {WIDTH} {_n(height)}" role="img">' + "".join(body) + "</svg>")


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def speed_ratios(rel: Release, path: str, p: dict) -> list:
    """Per-case speed ratio (a dot, joined to the floor by a line) against the floor (dashed). The
    axis spans the values, not zero to the top: the differences that matter are a few percent."""
    cases = [(i, c) for i, c in enumerate(p.get("cases", [])) if _number(c.get("ratio"))]
    floor = p.get("parameters", {}).get("floor")
    if not cases or not _number(floor):
        return []
    values = [c["ratio"] for _, c in cases] + [floor]
    pad = (max(values) - min(values)) * 0.15 or abs(floor) * 0.05 or 1.0
    lo, hi = min(values) - pad, max(values) + pad

    def x(v: float) -> float:
        return LEFT + (v - lo) / (hi - lo) * (RIGHT - LEFT)

    height = 30 + ROW * len(cases) + 10
    fx = x(floor)
    body = []
    for row, (i, case) in enumerate(cases):
        y = 30 + row * ROW + ROW / 2
        color = COLORS.get(case.get("status"), "#555555")
        body.append(f'<line x1="{LEFT}" y1="{_n(y)}" x2="{RIGHT}" y2="{_n(y)}" stroke="#e5e5e5"/>')
        body.append(f'<line x1="{_n(fx)}" y1="{_n(y)}" x2="{_n(x(case["ratio"]))}" y2="{_n(y)}" stroke="{color}" stroke-width="3"/>')
        body.append(f'<circle cx="{_n(x(case["ratio"]))}" cy="{_n(y)}" r="4.5" fill="{color}"/>')
        body.append(_label(rel.fig(path, f"/predicate/cases/{i}/id"), LEFT - 6, y + 4, "end"))
        body.append(_label(rel.fig(path, f"/predicate/cases/{i}/ratio"), RIGHT + 6, y + 4))
        body.append(_label(rel.fig(path, f"/predicate/cases/{i}/status"), RIGHT + 64, y + 4))
    body.append(f'<line x1="{_n(fx)}" y1="20" x2="{_n(fx)}" y2="{_n(height - 8)}" stroke="#222" stroke-dasharray="4 3"/>')
    body.append(_text("floor", fx - 4, 14, "end"))
    body.append(_label(rel.fig(path, "/predicate/parameters/floor"), fx + 4, 14))
    return [Chart("Speed ratio per case (candidate over incumbent) against the floor", _svg(height, body))]


def quality_bounds(rel: Release, path: str, p: dict) -> list:
    """Per metric: the one-sided bound (tick) and estimate (dot) against the threshold the margin
    sets (line), the passing side shaded; each metric on its own scale."""
    metrics = [(i, m) for i, m in enumerate(p.get("metrics", [])) if _number(m.get("bound")) and _number(m.get("threshold"))]
    if not metrics:
        return []
    rh = 34
    body = []
    for row, (i, m) in enumerate(metrics):
        y = 10 + row * rh
        values = [m["threshold"], m["bound"]] + ([m["estimate"]] if _number(m.get("estimate")) else [])
        lo, hi = min(values), max(values)
        pad = (hi - lo) * 0.2 or abs(hi) * 0.2 or 1.0
        lo, hi = lo - pad, hi + pad

        def x(v: float) -> float:
            return LEFT + (v - lo) / (hi - lo) * (RIGHT - LEFT)

        tx = x(m["threshold"])
        if m.get("bound_side") == "lower":  # the lower bound must reach the threshold: pass is to the right
            body.append(f'<rect x="{_n(tx)}" y="{_n(y + 4)}" width="{_n(RIGHT - tx)}" height="{rh - 12}" fill="#e3f1e8"/>')
        else:
            body.append(f'<rect x="{LEFT}" y="{_n(y + 4)}" width="{_n(tx - LEFT)}" height="{rh - 12}" fill="#e3f1e8"/>')
        mid = y + rh / 2 - 2
        body.append(f'<line x1="{LEFT}" y1="{_n(mid)}" x2="{RIGHT}" y2="{_n(mid)}" stroke="#999"/>')
        body.append(f'<line x1="{_n(tx)}" y1="{_n(y + 2)}" x2="{_n(tx)}" y2="{_n(y + rh - 6)}" stroke="#222" stroke-dasharray="3 2"/>')
        color = COLORS["pass"] if m.get("passed") else COLORS["fail"]
        bx = x(m["bound"])
        body.append(f'<line x1="{_n(bx)}" y1="{_n(y + 6)}" x2="{_n(bx)}" y2="{_n(y + rh - 10)}" stroke="{color}" stroke-width="3"/>')
        if _number(m.get("estimate")):
            body.append(f'<circle cx="{_n(x(m["estimate"]))}" cy="{_n(mid)}" r="3.5" fill="#222"/>')
        body.append(_label(rel.fig(path, f"/predicate/metrics/{i}/name"), LEFT - 6, mid + 4, "end"))
        body.append(_text("bound", RIGHT + 6, mid - 2))
        body.append(_label(rel.fig(path, f"/predicate/metrics/{i}/bound"), RIGHT + 74, mid - 2))
        body.append(_text("threshold", RIGHT + 6, mid + 11))
        body.append(_label(rel.fig(path, f"/predicate/metrics/{i}/threshold"), RIGHT + 74, mid + 11))
    return [Chart("Quality screen: one-sided bound (bar) and estimate (dot) against the threshold the margin sets "
                  "(dashed; passing side shaded)", _svg(10 + rh * len(metrics) + 6, body))]


def _time(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _steps(p: dict) -> list[tuple[str, dict]]:
    """(pointer of the step, step) for phases, routes, or a receipt that is itself one phase."""
    for key in ("phases", "routes"):
        if isinstance(p.get(key), list):
            return [(f"/predicate/{key}/{i}", s) for i, s in enumerate(p[key]) if isinstance(s, dict)]
    return [("/predicate", p)] if "started_at" in p and "ended_at" in p else []


def timeline(rel: Release, path: str, p: dict) -> list:
    """Phases as bars on one time axis, from the earliest start to the latest end."""
    steps = [(ptr, s, _time(s.get("started_at")), _time(s.get("ended_at"))) for ptr, s in _steps(p)]
    steps = [(ptr, s, a, b) for ptr, s, a, b in steps if a is not None and b is not None and "name" in s]
    if not steps:
        return []
    t0, t1 = min(a for _, _, a, _ in steps), max(b for _, _, _, b in steps)
    span = (t1 - t0) or 1.0
    scale = (RIGHT - LEFT) / span
    height = 30 + ROW * len(steps) + 10
    body = []
    for row, (ptr, s, a, b) in enumerate(steps):
        y = 30 + row * ROW
        color = COLORS.get(s.get("status"), "#555555")
        body.append(_label(rel.fig(path, f"{ptr}/name"), LEFT - 6, y + 14, "end"))
        width = max((b - a) * scale, 1.0)
        body.append(f'<rect x="{_n(LEFT + (a - t0) * scale)}" y="{_n(y + 3)}" width="{_n(width)}" height="{ROW - 6}" fill="{color}"/>')
    first = min(steps, key=lambda t: (t[2], t[0]))
    last = max(steps, key=lambda t: (t[3], t[0]))
    body.append(_label(rel.fig(path, f"{first[0]}/started_at"), LEFT, 16))
    body.append(_label(rel.fig(path, f"{last[0]}/ended_at"), RIGHT, 16, "end"))
    return [Chart("Phase timeline", _svg(height, body))]
