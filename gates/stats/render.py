"""Rich tables of verdict records for people at a terminal.

Every cell is a Text, never a markup string: case ids, metric names and reasons come from the
input, and `[red]` or `[/red]` in them must print as written, not style (or crash) the output."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

STYLE = {"pass": "bold green", "fail": "bold red", "inconclusive": "bold yellow"}


def _fmt(value, digits: int = 4) -> Text:
    if value is None:
        return Text("-")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, float):
        return Text(f"{value:.{digits}f}")
    return Text(str(value))


def _detail_table(record: dict) -> Table | None:
    kind = record["kind"]
    if kind == "verdict-abba":
        t = Table("case", "weight", "ratio", "spread A", "spread B", "A1=A2", "B1=B2", "status",
                  title=Text(f"ABBA, floor {record['parameters']['floor']:g}, weighted ratio "
                             f"{_fmt(record['weighted_ratio'])}"))
        for c in record["cases"]:
            t.add_row(_fmt(c["id"]), _fmt(c["weight"]), _fmt(c["ratio"]), _fmt(c["spread_a"]), _fmt(c["spread_b"]),
                      _fmt(c["repeat_identical_a"]), _fmt(c["repeat_identical_b"]), _fmt(c["status"]))
        return t
    if kind == "verdict-noninferiority":
        p = record["parameters"]
        t = Table("metric", "kind", "better", "estimate", "bound", "threshold", "passed",
                  title=Text(f"Non-inferiority, {p['resamples']} resamples, seed {p['seed']}, "
                             f"{p['confidence']:g} one-sided"))
        for m in record["metrics"]:
            t.add_row(_fmt(m["name"]), _fmt(m["kind"]), _fmt(m["better"]), _fmt(m["estimate"], 6),
                      Text(f"{m['bound_side']} {_fmt(m['bound'], 6)}"), Text(f"{m['threshold']:g}"), _fmt(m["passed"]))
        return t
    if kind == "verdict-latency":
        t = Table("position", "incumbent s", "candidate s", "allowed s", "margin s", "passed",
                  title=Text(f"Latency parity, worst {record['worst']}"))
        for p in record["positions"]:
            t.add_row(_fmt(p["id"]), _fmt(p["incumbent_s"]), _fmt(p["candidate_s"]), _fmt(p["allowed_s"]),
                      _fmt(p["margin_s"]), _fmt(p["passed"]))
        return t
    return None


def print_verdict(record: dict, console: Console | None = None) -> None:
    console = console or Console()
    detail = _detail_table(record)
    if detail is not None:
        console.print(detail)
    summary = Table.grid(padding=(0, 2))
    summary.add_row("kind", _fmt(record["kind"]))
    summary.add_row("verdict", Text(record["verdict"], style=STYLE[record["verdict"]]))
    for key, value in record.get("counts", {}).items():
        summary.add_row(key, _fmt(value))
    if record.get("first_difference"):
        summary.add_row("first difference", _fmt(record["first_difference"]["prompt"]))
    for reason in record["reasons"]:
        summary.add_row("reason", _fmt(reason))
    console.print(summary)
