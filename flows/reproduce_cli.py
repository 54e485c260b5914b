"""`assay reproduce`: build twice, compare, bisect each difference to a variation, without Prefect.

The same library path as the release flow's build and compare steps (builders.reproduce), on the
configured build hosts. Exit 0 when the two builds are identical, 1 when they differ, 3 on bad
input (an unknown variation, a ref that names no commit)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from builders import provenance, snapshot, variations
from builders.errors import SnapshotError
from builders.reproduce import reproduce as run_reproduce
from flows.config import load_config
from flows import build_hosts
from releases import exit_codes

console = Console(markup=False, emoji=False)
err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False)


def reproduce(
    ref: str = typer.Option("HEAD", "--ref", help="the commit (or any git ref) to build"),
    source: Optional[Path] = typer.Option(None, "--source", help="a git repository to build instead of the "
                                                                 "configured source"),
    subdir: Optional[str] = typer.Option(None, "--subdir", help="the package's directory in the repository "
                                                                "(default: the config's; '.' with --source)"),
    variation_list: Optional[str] = typer.Option(None, "--variations", help="comma-separated variations to vary "
                                                 f"(default all: {','.join(variations.NAMES)})"),
    config: Optional[Path] = typer.Option(None, "--config", help="assay.toml (default: the embedded defaults)"),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="where to build (must not exist; default: a "
                                                                   "new folder under the state directory)"),
    allow_dirty: bool = typer.Option(False, "--allow-dirty", help="build uncommitted changes too"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Build twice with varied hostname, user, umask, TZ, locale, clock, path..., compare member by
    member, and attribute every difference to the variation that causes it."""
    try:
        enabled = variations.parse_names(variation_list)
    except variations.VariationError as exc:
        err.print(Text(f"reproduce: {exc}"))
        raise typer.Exit(exit_codes.BAD_INPUT)
    cfg = load_config(config)
    repo = source.resolve() if source is not None else cfg.source
    sub = subdir if subdir is not None else ("." if source is not None else cfg.subdir)
    root = (workdir or cfg.state_dir / "reproduce" / time.strftime("%Y%m%dT%H%M%S")).resolve()
    if root.exists():
        err.print(Text(f"reproduce: --workdir {root} already exists; every run starts in a new folder"))
        raise typer.Exit(exit_codes.BAD_INPUT)
    try:
        candidate = snapshot.freeze(repo, ref=ref, subdir=sub, allow_dirty=allow_dirty)
    except SnapshotError as exc:
        err.print(Text(f"reproduce: {exc}"))
        raise typer.Exit(exit_codes.BAD_INPUT)
    src = snapshot.export_source(repo, candidate, root / "source")
    say = (lambda line: None) if as_json else (lambda line: err.print(Text(line)))
    with build_hosts.opened(cfg, log=say) as bh:
        result = run_reproduce(*bh.hosts, candidate, src, str(root / "build"), local_dir=root, enabled=enabled,
                               python_a=bh.pythons[0], python_b=bh.pythons[1], placements=bh.placements,
                               timeout=cfg.build_timeout_s, say=say, kernel_archs=cfg.kernel_archs,
                               source_uri=provenance.repository_uri(repo, cfg.source_uri))
    summary = result.summary()
    (root / "reproducibility.json").write_text(json.dumps(result.record, indent=2) + "\n")
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        _show(summary, root)
    raise typer.Exit(exit_codes.OK if summary["identical"] else exit_codes.FAILED)


def _show(summary: dict, root: Path) -> None:
    table = Table("variation", "build a", "build b", "varied")
    for name, v in summary["variations"].items():
        table.add_row(Text(name), Text(v["a"]), Text(v["b"]), Text("yes" if v["varied"] else f"no: {v.get('not_varied', '')}"))
    console.print(table)
    for label, where in summary["hosts"].items():
        line = f"build {label}: on {where['kind']} host {where['host']!r}"
        if where.get("fallback"):
            line += f" (no container: {where['fallback']})"
        console.print(Text(line))
    if summary["identical"]:
        console.print(Text("identical: every artifact is the same byte for byte"))
        return
    diffs = Table("artifact", "member", "kind", "cause")
    for d in summary["differences"]:
        diffs.add_row(*(Text(str(x)) for x in (d["artifact"], d["member"] or "(whole file)", d["kind"], d["cause"])))
    console.print(diffs)
    for e in summary["evidence"]:
        console.print(Text(f"diffoscope: {root / 'evidence' / e['html']['name']}"), soft_wrap=True)
