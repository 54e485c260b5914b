"""The key of a lane's kept judged-gate measurements (flows/judged_evidence.py): the same exactly when the
same bytes would be measured the same way on the same lane; thresholds are not part of it."""

from pathlib import Path

from builders.incumbent import Incumbent
from flows.config import load_config
from flows.judged_evidence import evidence_key, judged_evidence_dir

INCUMBENT = Incumbent({"version": "0.1.0", "wheel_sha256": "e" * 64, "source_commit": "f" * 40, "origin": "ref"},
                      Path("incumbent.whl"))


def _config(tmp_path: Path, gates: str = "", model: str = "m") -> object:
    path = tmp_path / f"assay-{abs(hash((gates, model)))}.toml"
    path.write_text('[release]\nname = "x"\nsource = "."\nsubdir = "engine"\napprovers = ["a"]\n'
                    '[store]\nkind = "filesystem"\npath = "s"\n[build]\nhosts = ["local", "local"]\n'
                    f'[[lanes]]\nname = "cpu-reference"\nkind = "cpu-reference"\nhost = "local"\nmodel = "{model}"\n'
                    f'[lanes.gates]\nsize = "cpu"\n{gates}')
    return load_config(path)


def _key(tmp_path, wheel_bytes=b"wheel", incumbent=INCUMBENT, **config):
    cfg = _config(tmp_path, **config)
    wheel = tmp_path / "assay_engine-0.1.0-py3-none-any.whl"
    wheel.write_bytes(wheel_bytes)
    return evidence_key(cfg, cfg.lane("cpu-reference"), wheel, incumbent)


def test_the_key_names_wheels_lane_and_sizes_not_thresholds(tmp_path):
    base = _key(tmp_path)
    assert len(base) == 64 and base == _key(tmp_path)
    assert _key(tmp_path, gates="[lanes.gates.abba]\nmin_ratio = 1000.0\nfloor = 0.5\n") == base
    other_incumbent = Incumbent({**INCUMBENT.identity, "wheel_sha256": "d" * 64}, INCUMBENT.wheel)
    changed = [_key(tmp_path, wheel_bytes=b"another wheel"), _key(tmp_path, incumbent=other_incumbent),
               _key(tmp_path, model="another-model"), _key(tmp_path, gates="[lanes.gates.abba]\nrepeats = 1\n"),
               _key(tmp_path, gates="[lanes.gates.noninferiority]\ncases = 9\n")]
    assert base not in changed and len(set(changed)) == len(changed)


def test_evidence_lives_under_the_state_directory(tmp_path):
    cfg = _config(tmp_path)
    assert judged_evidence_dir(cfg) == cfg.state_dir / "judged-evidence"
