from builders.environment import hermetic_env, umask_wrap, varied_values
from releases.canonical import canonical_json


def test_fixed_part_is_hermetic_and_inside_the_build_dir():
    e = hermetic_env(1735787045, "/w/root/a", "a", path="/bin", workroot="/w/root")
    env = e.env
    assert env["SOURCE_DATE_EPOCH"] == "1735787045"
    assert (env["TZ"], env["LC_ALL"], env["LANG"], env["PYTHONHASHSEED"]) == ("UTC", "C.UTF-8", "C.UTF-8", "0")
    assert env["PIP_NO_INDEX"] == "1" and env["PATH"] == "/bin"
    for key in ("HOME", "TMPDIR", "PIP_CACHE_DIR", "XDG_CACHE_HOME"):
        assert env[key].startswith("/w/root/a/"), key
    assert set(e.dirs) >= {env["HOME"], env["TMPDIR"], e.out_dir}


def test_a_and_b_differ_in_every_varied_value_and_records_show_it():
    a = hermetic_env(1, "/w/root/a", "a", workroot="/w/root")
    b = hermetic_env(1, "/w/root/bb/build-b", "b", workroot="/w/root")
    va, vb = varied_values("a"), varied_values("b")
    assert all(va[k] != vb[k] for k in va)
    assert len(va["ASSAY_ENV_NOISE"]) != len(vb["ASSAY_ENV_NOISE"]) or va["COLUMNS"] != vb["COLUMNS"]
    assert a.record_varied["build_dir"] == "${WORKROOT}/a"
    assert b.record_varied["build_dir"] == "${WORKROOT}/bb/build-b"
    assert a.record_environment == b.record_environment  # the fixed part really is fixed
    assert a.env["HOME"] != b.env["HOME"]
    for rec in (a.record_environment, a.record_varied, b.record_environment, b.record_varied):
        assert b"/w/root" not in canonical_json(rec)


def test_umask_wrap_passes_arguments_verbatim():
    argv = umask_wrap(["python", "-c", "print('a b; $HOME')"])
    assert argv[:2] == ["sh", "-c"] and "umask 022" in argv[2]
    assert argv[-1] == "print('a b; $HOME')"
