"""Gate settings: size defaults, lane overrides, typed errors; the config keys that carry them."""

import pytest

from flows.config import ConfigError, load_config
from gates.judged.errors import SettingsError
from gates.judged.settings import resolve


def test_sizes_and_overrides():
    full, cpu = resolve("full"), resolve("cpu", {"abba": {"min_ratio": 0.97}, "noninferiority": {"cases": 20}})
    assert (full["noninferiority"]["cases"], full["noninferiority"]["variants"], full["determinism"]["prompts"]) == (140, 8, 80)
    assert (cpu["noninferiority"]["cases"], cpu["noninferiority"]["variants"]) == (20, 2)
    assert cpu["abba"]["min_ratio"] == 0.97 and cpu["abba"]["floor"] == 0.95 and cpu["size"] == "cpu"


@pytest.mark.parametrize("gates,where", [
    ({"abba": {"min_ratoi": 1}}, "gates.abba.min_ratoi"),
    ({"abba": {"min_ratio": "high"}}, "gates.abba.min_ratio"),
    ({"noninferiority": {"cases": 141}}, "gates.noninferiority.cases"),
    ({"determinism": {"prompts": 2.5}}, "gates.determinism.prompts"),
    ({"noninferiority": {"resamples": 2**60}}, "gates.noninferiority.resamples"),
    ({"speed": {}}, "gates.speed"),
])
def test_bad_settings_name_the_key(gates, where):
    with pytest.raises(SettingsError) as err:
        resolve("cpu", gates)
    assert err.value.where == where


def test_defaults_name_an_incumbent_and_judge_cpu_reference_at_the_cpu_size():
    """The embedded defaults (make run) judge cpu-reference against the incumbent at the CPU size
    (docs/STATISTICS.md); the size's defaults fill the rest."""
    cfg = load_config()
    assert cfg.incumbent == {"ref": "b9c0bab5b4ae7e61225d42da5c0aaf36b97ee701"}
    assert [(lane.name, lane.gates) for lane in cfg.lanes][:2] == [("cpu-smoke", None), ("cpu-reference", {"size": "cpu"})]
    cpu = resolve("cpu", cfg.lane("cpu-reference").gates)
    assert (cpu["abba"]["repeats"], cpu["abba"]["max_leg_spread"], cpu["abba"]["floor"]) == (3, 0.20, 0.95)
    assert (cpu["noninferiority"]["cases"], cpu["noninferiority"]["variants"], cpu["determinism"]["prompts"]) == (8, 2, 4)
    gates = {"size": "cpu", "abba": {"min_ratio": 0.97}}
    assert resolve(gates["size"], gates)["abba"]["min_ratio"] == 0.97


def test_config_schema_rejects_unknown_gate_keys_and_two_incumbents(tmp_path):
    text = ('[release]\nname = "x"\nsource = "."\nsubdir = "engine"\napprovers = ["a"]\n'
            '[store]\nkind = "filesystem"\npath = "s"\n[build]\nhosts = ["local", "local"]\n')
    bad_gate = tmp_path / "a.toml"
    bad_gate.write_text(text + '[[lanes]]\nname = "l"\nkind = "cpu-smoke"\nhost = "local"\n'
                               '[lanes.gates.abba]\nmin_ratoi = 0.97\n')
    with pytest.raises(ConfigError) as err:
        load_config(bad_gate)
    assert err.value.key_path == "/lanes/0/gates/abba"
    both = tmp_path / "b.toml"
    both.write_text(text + '[incumbent]\nref = "HEAD~1"\nwheel = "x.whl"\n'
                           '[[lanes]]\nname = "l"\nkind = "cpu-smoke"\nhost = "local"\n')
    with pytest.raises(ConfigError) as err:
        load_config(both)
    assert err.value.key_path == "/incumbent"
