"""Prepare what a lane host with no Prefect needs to run `python -m gates.qualify` for a commit:

    python scripts/lane_bundle.py OUT [--ref HEAD] [--config assay.toml] [--lane NAME [--model DIR]]

OUT receives candidate.json (the frozen candidate), the engine wheel built from it by the release
recipe, and incumbent/ (the incumbent's wheel and identity.json, resolved as the release flow does:
with --from-store the store's latest published release, else the config's [incumbent], which is
what a fresh clone's release flow resolves).

With --lane, OUT also holds everything the lane host needs besides Python and its packages:
lane.json (the lane's table as gates reads it, run on the host itself), gates.json (the lane's
judged-gate settings), source/ (gates/, hosts/ and releases/ of this checkout's HEAD) and
run-lane.sh, so that on the lane host (docs/LANES.md, "A lane on a GPU host") one command runs
the whole lane, its chain and judged gates, as the release run would:

    sh OUT/run-lane.sh LANE_KEY.pem EVIDENCE

Without --lane, copy OUT and the pipeline's source there and run `python -m gates.qualify` with
the arguments run-lane.sh would give. OUT is written whole or not at all.
"""

from __future__ import annotations

import argparse
import io
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from builders.errors import BuilderError  # noqa: E402
from builders.incumbent import resolve_incumbent  # noqa: E402
from flows.config import ConfigError, load_config  # noqa: E402
from flows.lane_evidence import build_candidate_wheel  # noqa: E402
from flows.stores import open_store  # noqa: E402
from releases import exit_codes  # noqa: E402
from releases.errors import ReleaseError  # noqa: E402

# What `python -m gates.qualify` imports from the pipeline (gates never imports flows or builders).
PIPELINE_DIRS = ("gates", "hosts", "releases")


class BundleError(Exception):
    """The bundle cannot be made as asked; the message names what and why."""


def lane_files(cfg, name: str, model: str | None) -> tuple[dict, dict]:
    """(lane.json, gates.json) of lane NAME: its table as gates reads it, run on the lane host
    itself ("local"), and its [lanes.gates] table."""
    lane = cfg.lane(name)
    table = cfg.lane_table(name)
    table["host"] = "local"
    if model is not None:
        table["model"] = model
    if lane.kind != "cpu-smoke" and not table.get("model"):
        raise BundleError(f"lane {name!r} has no `model`; give the model directory on the lane host with --model")
    if table.get("model") and not Path(table["model"]).is_absolute():
        raise BundleError(f"lane {name!r}: model {table['model']!r} is relative; give the model directory "
                          "on the lane host, absolute, with --model")
    return table, dict(lane.gates or {})


def export_pipeline(dest: Path) -> str:
    """gates/, hosts/ and releases/ of this checkout's HEAD into DEST; returns HEAD's commit."""
    git = lambda *args: subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,  # noqa: E731
                                       timeout=120).stdout
    commit = git("rev-parse", "HEAD").decode().strip()
    if git("status", "--porcelain", "--", *PIPELINE_DIRS).strip():
        print(f"lane_bundle: warning: {', '.join(PIPELINE_DIRS)} have changes not committed; the bundle holds "
              f"HEAD's ({commit[:12]})", file=sys.stderr)
    with tarfile.open(fileobj=io.BytesIO(git("archive", "--format=tar", "HEAD", *PIPELINE_DIRS))) as tar:
        tar.extractall(dest, filter="data")
    return commit


def runner(lane: str, wheel: str, incumbent_wheel: str, gates_size: str | None) -> str:
    """run-lane.sh: the whole lane from the bundle's own folder, signed with the given key."""
    q = shlex.quote
    size = f" --gates-size {q(gates_size)}" if gates_size else ""
    return f"""#!/bin/sh
# Run lane {lane} here, on its host: sh run-lane.sh LANE_KEY.pem EVIDENCE
# (made by scripts/lane_bundle.py; PYTHON names the interpreter, python3 by default). EVIDENCE/receipts
# is what goes back: `assay lanes import EVIDENCE --lane {lane} --dry-run --wheel <this bundle's wheel>`.
# Started detached, it says where it stands in EVIDENCE: run-lane.pid (this script's process) while
# the lane runs, run-lane.exit (the lane's exit code) once it has ended.
set -eu
if [ "$#" -ne 2 ]; then
    echo "usage: sh run-lane.sh LANE_KEY.pem EVIDENCE" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$1" ]; then
    echo "run-lane.sh: $1: no such key file" >&2
    exit 3
fi
key=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
mkdir -p "$2"
out=$(cd "$2" && pwd)
rm -f "$out/run-lane.exit"
echo "$$" > "$out/run-lane.pid"
cd "$here/source"
rc=0
"${{PYTHON:-python3}}" -m gates.qualify --lane {q(lane)} --spec "$here/lane.json" \\
    --candidate "$here/candidate.json" --wheel "$here/"{q(wheel)} \\
    --incumbent-wheel "$here/incumbent/"{q(incumbent_wheel)} --incumbent-identity "$here/incumbent/identity.json" \\
    --gates-settings "$here/gates.json"{size} --out "$out" --key "$key" || rc=$?
echo "$rc" > "$out/run-lane.exit"
rm -f "$out/run-lane.pid"
exit "$rc"
"""


def write_bundle(out: Path, args, say) -> dict:
    cfg = load_config(args.config)
    lane = lane_files(cfg, args.lane, args.model) if args.lane else None
    candidate, wheel = build_candidate_wheel(cfg, args.ref, out)
    say(f"candidate {candidate['release_version']} (commit {candidate['commit'][:12]}, tree {candidate['tree'][:12]})")
    (out / "candidate.json").write_text(json.dumps(candidate, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    incumbent = resolve_incumbent(cfg.incumbent, repo_dir=cfg.source, state_dir=cfg.state_dir,
                                  store=open_store(cfg) if args.from_store else None, subdir=cfg.subdir, progress=say)
    (out / "incumbent").mkdir()
    shutil.copy2(incumbent.wheel, out / "incumbent" / incumbent.wheel.name)
    (out / "incumbent" / "identity.json").write_text(json.dumps(incumbent.identity, indent=1, sort_keys=True) + "\n",
                                                      encoding="utf-8")
    summary = {"candidate": candidate["release_version"], "wheel": wheel.name, "incumbent": incumbent.identity}
    if lane:
        table, gates = lane
        (out / "lane.json").write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        (out / "gates.json").write_text(json.dumps(gates, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        summary["pipeline_commit"] = export_pipeline(out / "source")
        script = out / "run-lane.sh"
        script.write_text(runner(args.lane, wheel.name, incumbent.wheel.name, gates.get("size")), encoding="utf-8")
        script.chmod(0o755)
        summary["lane"] = args.lane
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/lane_bundle.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory to write (must not exist)")
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--config", help="assay.toml (default: the embedded defaults)")
    ap.add_argument("--from-store", action="store_true", help="take the incumbent from the store when it holds a release")
    ap.add_argument("--lane", help="also write lane.json, gates.json, source/ and run-lane.sh for this lane")
    ap.add_argument("--model", help="with --lane: the model directory on the lane host (default: the lane's `model`)")
    args = ap.parse_args(argv)
    if args.model and not args.lane:
        ap.error("--model needs --lane")
    out = Path(args.out)
    if out.exists() or out.is_symlink():
        print(f"lane_bundle: {out} exists; give a new directory", file=sys.stderr)
        return exit_codes.USAGE
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built beside OUT and renamed into place last, so a failure leaves no half bundle.
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        summary = write_bundle(work, args, say)
        work.chmod(0o755)  # mkdtemp's 0700 would keep the bundle from others on the lane host
        work.rename(out)
    except (BundleError, ConfigError, BuilderError, ReleaseError, OSError, subprocess.SubprocessError) as exc:
        print(f"lane_bundle: error: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary, sort_keys=True))
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
