"""Sections for the judges' verdicts (each with its bounds), and a generic section for any other
receipt kind, printed leaf by leaf from its predicate."""
from __future__ import annotations

from releases.notes import charts
from releases.notes.doc import Bullets, Code, Heading, Para, Table, joined
from releases.notes.sections import SKIP, leaf_rows, statement_kind
from releases.notes.source import Release

# Kinds another section already renders; everything else is a verdict or rendered generically.
COVERED = ("candidate", "build", "reproducibility", "lane", "acceptance", "approval")


def _opening(rel: Release, path: str, title: str, pred: dict) -> list:
    blocks = [Heading(3, [title, " ", Code(path)]),
              Para(["Verdict ", rel.fig(path, "/predicate/verdict"), "."])]
    if pred.get("reasons"):
        blocks.append(Bullets([[rel.fig(path, f"/predicate/reasons/{i}")] for i, _ in enumerate(pred["reasons"])]))
    return blocks


def _row(rel: Release, path: str, base: str, keys: tuple) -> list:
    return [[rel.fig(path, f"{base}/{k}")] for k in keys]


def abba(rel: Release, path: str, p: dict) -> list:
    blocks = _opening(rel, path, "Speed (ABBA)", p)
    blocks.append(Para(["Floor ", rel.fig(path, "/predicate/parameters/floor"), ", weighted ratio ",
                        rel.fig(path, "/predicate/weighted_ratio"), ", maximum leg spread ",
                        rel.fig(path, "/predicate/parameters/max_leg_spread"), "; ratio ",
                        rel.fig(path, "/predicate/parameters/ratio"), "."]))
    keys = ("id", "weight", "ratio", "spread_a", "spread_b", "status")
    blocks.append(Table(["case", "weight", "ratio", "spread A", "spread B", "status"],
                        [_row(rel, path, f"/predicate/cases/{i}", keys) for i, _ in enumerate(p["cases"])]))
    blocks.append(Table(["count", "value"], leaf_rows(rel, path, ("predicate", "counts"), p["counts"])))
    return blocks + charts.speed_ratios(rel, path, p)


def noninferiority(rel: Release, path: str, p: dict) -> list:
    blocks = _opening(rel, path, "Quality screen (non-inferiority)", p)
    blocks.append(Para(["Confidence ", rel.fig(path, "/predicate/parameters/confidence"), ", resamples ",
                        rel.fig(path, "/predicate/parameters/resamples"), ", seed ",
                        rel.fig(path, "/predicate/parameters/seed"), "; pairs used ",
                        rel.fig(path, "/predicate/counts/pairs_used"), ", error rate ",
                        rel.fig(path, "/predicate/counts/error_rate"), "."]))
    keys = ("name", "better", "margin", "threshold", "bound_side", "estimate", "bound", "passed")
    blocks.append(Table(["metric", "better", "margin", "threshold", "bound side", "estimate", "bound", "passed"],
                        [_row(rel, path, f"/predicate/metrics/{i}", keys) for i, _ in enumerate(p["metrics"])]))
    return blocks + charts.quality_bounds(rel, path, p)


def determinism(rel: Release, path: str, p: dict) -> list:
    blocks = _opening(rel, path, "Determinism", p)
    blocks.append(Table(["count", "value"], leaf_rows(rel, path, ("predicate", "counts"), p["counts"])))
    if p.get("first_difference"):
        first = "/predicate/first_difference"
        blocks.append(Para(["First difference: prompt ", rel.fig(path, f"{first}/prompt"), " in run ",
                            rel.fig(path, f"{first}/run"), ", output digests ",
                            *joined([rel.fig(path, f"{first}/sha256/{i}") for i, _ in enumerate(p["first_difference"]["sha256"])]),
                            "."]))
    return blocks


def latency(rel: Release, path: str, p: dict) -> list:
    blocks = _opening(rel, path, "Latency parity", p)
    blocks.append(Para(["Allowed: ", rel.fig(path, "/predicate/parameters/rule"), " with absolute ",
                        rel.fig(path, "/predicate/parameters/absolute_s"), " s and relative ",
                        rel.fig(path, "/predicate/parameters/relative"), "."]))
    keys = ("id", "incumbent_s", "candidate_s", "allowed_s", "margin_s", "passed")
    blocks.append(Table(["position", "incumbent (s)", "candidate (s)", "allowed (s)", "margin (s)", "passed"],
                        [_row(rel, path, f"/predicate/positions/{i}", keys) for i, _ in enumerate(p["positions"])]))
    if p.get("worst"):
        blocks.append(Para(["Worst position ", rel.fig(path, "/predicate/worst/id"), " with margin ",
                            rel.fig(path, "/predicate/worst/margin_s"), " s."]))
    return blocks


def generic(rel: Release, path: str, kind: str, p: dict) -> list:
    blocks = [Heading(3, ["Receipt ", Code(kind), " ", Code(path)])]
    if isinstance(p, dict) and "verdict" in p:
        blocks.append(Para(["Verdict ", rel.fig(path, "/predicate/verdict"), "."]))
    rows = leaf_rows(rel, path, ("predicate",), p, skip=SKIP)
    blocks.append(Table(["field", "value"], rows) if rows else Para(["The predicate records no values."]))
    return blocks + charts.timeline(rel, path, p)


SPECIFIC = {"verdict-abba": abba, "verdict-noninferiority": noninferiority, "verdict-determinism": determinism,
            "verdict-latency": latency}


def verdicts(rel: Release) -> list:
    blocks: list = [Heading(2, ["Verdicts and other receipts"])]
    shown = False
    for entry, stmt in rel.receipts():
        kind = statement_kind(stmt)
        if kind in COVERED:
            continue
        shown = True
        if kind in SPECIFIC:
            blocks += SPECIFIC[kind](rel, entry["path"], stmt["predicate"])
        else:
            blocks += generic(rel, entry["path"], kind, stmt["predicate"])
    if not shown:
        blocks.append(Para(["No verdict receipt is recorded."]))
    return blocks
