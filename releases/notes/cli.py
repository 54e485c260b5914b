"""`assay notes DIR [--format md|html] [--out FILE]`: a thin CLI over render_notes (mounted by
the lead). Exit codes: releases.exit_codes."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from releases import exit_codes
from releases.atomic import write_atomic
from releases.errors import ReleaseError
from releases.notes.render import FORMATS, render_notes

app = typer.Typer(help="Render a release's notes from its records.", add_completion=False)


@app.command()
def notes(
    release_dir: Path = typer.Argument(..., help="release directory"),
    fmt: str = typer.Option("md", "--format", help=" | ".join(FORMATS)),
    out: Optional[Path] = typer.Option(None, "--out", help="write here instead of standard output"),
) -> None:
    """Render the notes; every figure links to the receipt file and JSON pointer it came from."""
    if fmt not in FORMATS:
        typer.echo(f"--format {fmt!r} is not one of {', '.join(FORMATS)}", err=True)
        raise typer.Exit(exit_codes.USAGE)
    if not release_dir.is_dir():
        typer.echo(f"{release_dir}: not a release directory", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT)
    try:
        text = render_notes(release_dir, fmt)
    except ReleaseError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT)
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, text.encode("utf-8"))
    except OSError as exc:
        typer.echo(f"{out}: cannot write: {exc.strerror or exc}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT)
    typer.echo(f"wrote {out}", err=True)
