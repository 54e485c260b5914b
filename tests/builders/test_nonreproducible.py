"""A real build that stamps the clock into the wheel must be caught and explained."""
from builders.compare import compare
from releases.canonical import canonical_json
from tests.builders.conftest import build_fixture, fixture_files


def test_a_clock_stamping_build_hook_is_caught(tmp_path):
    built = build_fixture(tmp_path, fixture_files(clock_hook=True))
    a_dir, b_dir = built.a.artifacts[0].parent, built.b.artifacts[0].parent
    rec = compare(a_dir, b_dir, built.candidate)
    assert rec["verdict"] == "not_reproducible" and rec["unexplained"] == 0
    wheel = next(f for f in rec["files"] if f["name"].endswith(".whl"))
    assert not wheel["identical"]
    kinds = {(d["member"], d["kind"]) for d in wheel["differences"]}
    # The stamped module, and RECORD which lists its digest; nothing else differs.
    assert kinds == {("fixturepkg/_stamp.py", "content"), ("fixture_pkg-1.2.3.dist-info/RECORD", "content")}
    stamp = next(d for d in wheel["differences"] if d["member"] == "fixturepkg/_stamp.py")
    assert "line 1" in stamp["detail"]


def test_a_build_that_embeds_its_path_and_user_is_caught(tmp_path):
    built = build_fixture(tmp_path, fixture_files(env_hook=True))
    rec = compare(built.a.artifacts[0].parent, built.b.artifacts[0].parent, built.candidate)
    assert rec["verdict"] == "not_reproducible"
    members = {d["member"] for f in rec["files"] for d in f["differences"] if d["kind"] == "content"}
    assert "fixturepkg/_stamp.py" in members
    # The record says where the bytes differ without quoting them: no build path leaks into it.
    assert str(tmp_path).encode() not in canonical_json(rec)
