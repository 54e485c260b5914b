import os
import sys

import pytest

from builders import variations
from builders.environment import hermetic_env
from hosts.local import LocalHost
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
    assert {k for k in a.env if a.env[k] != b.env.get(k)} >= {
        "USER", "LOGNAME", "HOSTNAME", "TZ", "LANG", "LC_ALL", "HOME", "ASSAY_ENV_NOISE", "TMPDIR"}
    assert set(b.env) ^ set(a.env) == {"ASSAY_NOISE_A", "ASSAY_NOISE_B"}  # noise: names differ too, not only values
    assert a.record_varied["build_dir"] == "${WORKROOT}/a"
    assert b.record_varied["build_dir"] == "${WORKROOT}/bb/build-b"
    assert a.record_environment == b.record_environment  # the fixed part really is fixed
    va, vb = a.record_varied["variations"], b.record_varied["variations"]
    assert [n for n in variations.NAMES if va[n]["value"] != vb[n]["value"]] == list(variations.NAMES)
    assert vb["fs_order"]["value"] == "directory entries shuffled (disorderfs)"
    assert vb["home_dir"]["value"] == "${BUILD_DIR}/elsewhere/home-b"
    for rec in (a.record_environment, a.record_varied, b.record_environment, b.record_varied):
        assert b"/w/root" not in canonical_json(rec)


def test_wrap_makes_the_plan_real_and_passes_arguments_verbatim():
    argv = ["python", "-c", "print('a b; $HOME')"]
    b = variations.wrap(argv, variations.plan_for("b"), {})
    assert b[:2] == ["unshare", "--uts"] and b[-3:] == argv
    script = b[4]
    assert "hostname assay-build-b-varied" in script and "umask 002" in script
    assert f"--map-user={variations.UID_B}" in script and "faketime -f +397d" in script
    a = variations.wrap(argv, variations.plan_for("a"), {"hostname": "no unshare here"})
    assert a[:2] == ["sh", "-c"] and "umask 022" in a[2] and "faketime" not in a[2] and "hostname" not in a[2]
    one = variations.wrap(argv, variations.trial_plan("time"), {})
    assert "faketime" in one[4] and "map-user" not in one[4] and "umask 022" in one[4]


def test_probe_on_this_host_says_what_can_vary():
    missing = variations.probe(LocalHost(), sys.executable)
    # This machine runs the builds as root with util-linux, libfaketime and disorderfs
    # (scripts/build_tools.sh installs the tools): every variation must vary.
    assert missing == {}, missing


def test_fs_order_mount_shuffles_the_source_and_unmounts(tmp_path):
    host = LocalHost()
    src = tmp_path / "src"
    src.mkdir()
    names = [f"f{i:02d}" for i in range(40)]
    for n in names:
        (src / n).write_text(n)
    host.run(variations.fs_order_mount(str(src))).check()
    try:
        listed = os.listdir(src)
        assert sorted(listed) == names and listed != names and (src / "f07").read_text() == "f07"
        assert (tmp_path / "src.lower").is_dir()
    finally:
        host.run(variations.fs_order_unmount(str(src))).check()
    assert os.listdir(src) == []  # the mount point is empty again: the build directory can go


def test_variation_lists_are_checked():
    assert variations.parse_names(None) == variations.NAMES
    assert variations.parse_names("tz, umask,tz") == ("tz", "umask")
    with pytest.raises(variations.VariationError, match="colour"):
        variations.parse_names("tz,colour")
    with pytest.raises(variations.VariationError, match="none given"):
        variations.parse_names(" , ")


def test_what_a_host_cannot_vary_is_recorded_not_pretended():
    a = variations.record(variations.plan_for("a"), {}, "${WORKROOT}/a")
    missing = {"hostname": "unshare refused", "time": "no faketime", "user": "no user namespace",
               "fs_order": "no disorderfs"}
    b = variations.record(variations.plan_for("b"), missing, "${WORKROOT}/bb/x")
    s = variations.summary(a, b, variations.NAMES)
    assert s["time"] == {"a": "host clock", "b": "host clock", "varied": False, "not_varied": "no faketime"}
    # b ran under whatever its machine is called: that differs from a's set name, but was not set by us.
    assert s["hostname"]["b"] == "the host's own hostname" and s["hostname"]["not_varied"] == "unshare refused"
    assert s["user"]["varied"] and s["user"]["not_varied"] == "uid: no user namespace"  # the name still varies
    assert s["umask"] == {"a": "022", "b": "002", "varied": True}
    only = variations.summary(a, variations.record(variations.plan_for("b", ("tz",)), {}, "${WORKROOT}/a"), ("tz",))
    assert [n for n, v in only.items() if v["varied"]] == ["tz"]
    assert only["umask"]["not_varied"] == "not asked for (--variations)"


def test_variation_records_read_as_no_private_marker_even_as_pointers():
    """The notes cite records by JSON pointer (/variations/NAME/value): no name may look like a home path."""
    from releases import markers

    rec = variations.record(variations.plan_for("b"), {}, "${WORKROOT}/bb/x")
    pointers = [f"/predicate/buildDefinition/internalParameters/varied/variations/{n}/{k}" for n in rec for k in rec[n]]
    assert [p for p in pointers if markers.scan_text(p)] == []
    assert markers.scan_text("/variations/home/value")  # what the name `home` did
