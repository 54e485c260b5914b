"""Prepare what a lane host with no Prefect needs to run `python -m gates.qualify` for a commit:

    python scripts/lane_bundle.py OUT [--ref HEAD] [--config assay.toml]

OUT receives candidate.json (the frozen candidate), the engine wheel built from it by the release
recipe, and incumbent/ (the incumbent's wheel and identity.json, resolved as the release flow does:
with --from-store the store's latest published release, else the config's [incumbent], which is
what a fresh clone's release flow resolves). Copy OUT and the pipeline's
source to the lane host, then run there (docs/LANES.md, "A lane on a GPU host"):

    python -m gates.qualify --lane NAME --spec lane.json --candidate OUT/candidate.json \\
        --wheel OUT/<wheel> --incumbent-wheel OUT/incumbent/<wheel> \\
        --incumbent-identity OUT/incumbent/identity.json --out EVIDENCE --key LANE_KEY.pem
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from builders.incumbent import resolve_incumbent  # noqa: E402
from flows.config import load_config  # noqa: E402
from flows.lane_evidence import build_candidate_wheel  # noqa: E402
from flows.stores import open_store  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/lane_bundle.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory to write (must not exist)")
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--config", help="assay.toml (default: the embedded defaults)")
    ap.add_argument("--from-store", action="store_true", help="take the incumbent from the store when it holds a release")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        print(f"lane_bundle: {out} exists; give a new directory", file=sys.stderr)
        return 2
    cfg = load_config(args.config)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    out.mkdir(parents=True)
    candidate, wheel = build_candidate_wheel(cfg, args.ref, out)
    say(f"candidate {candidate['release_version']} (commit {candidate['commit'][:12]}, tree {candidate['tree'][:12]})")
    (out / "candidate.json").write_text(json.dumps(candidate, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    incumbent = resolve_incumbent(cfg.incumbent, repo_dir=cfg.source, state_dir=cfg.state_dir,
                                  store=open_store(cfg) if args.from_store else None, subdir=cfg.subdir, progress=say)
    (out / "incumbent").mkdir()
    shutil.copy2(incumbent.wheel, out / "incumbent" / incumbent.wheel.name)
    (out / "incumbent" / "identity.json").write_text(json.dumps(incumbent.identity, indent=1, sort_keys=True) + "\n",
                                                      encoding="utf-8")
    print(json.dumps({"candidate": candidate["release_version"], "wheel": wheel.name,
                      "incumbent": incumbent.identity}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
