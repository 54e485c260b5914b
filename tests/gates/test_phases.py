"""The resumable phase chain."""

from __future__ import annotations

from gates.phases import PhaseChain, PhaseFailed, verdict_of


def test_chain_stops_at_first_failure_and_skips_the_rest(tmp_path):
    ran = []

    def ok(name):
        return lambda: ran.append(name) or {"n": name}

    def bad():
        raise PhaseFailed("it broke", {"detail": 7})

    out = PhaseChain(tmp_path / "s.json", key="k").run([("a", ok("a")), ("b", bad), ("c", ok("c"))])
    assert [o.status for o in out] == ["pass", "fail", "skipped"]
    assert ran == ["a"]
    assert out[1].facts["reason"] == "it broke" and out[1].facts["detail"] == 7
    assert verdict_of(out) == "fail"


def test_resumable_phase_that_passed_is_not_run_again(tmp_path):
    calls = {"a": 0, "b": 0}

    def count(name, fail=False):
        def body():
            calls[name] += 1
            if fail:
                raise PhaseFailed("first time")
            return {}
        return body

    state = tmp_path / "s.json"
    first = PhaseChain(state, key="cand:lane").run([("a", count("a")), ("b", count("b", fail=True))], resumable={"a"})
    assert verdict_of(first) == "fail"
    second = PhaseChain(state, key="cand:lane").run([("a", count("a")), ("b", count("b"))], resumable={"a"})
    assert verdict_of(second) == "pass"
    assert calls == {"a": 1, "b": 2}
    # Another candidate never inherits outcomes.
    PhaseChain(state, key="other:lane").run([("a", count("a"))], resumable={"a"})
    assert calls["a"] == 2


def test_inconclusive_never_reads_as_pass(tmp_path):
    def unsure():
        raise PhaseFailed("no signal", status="inconclusive")

    out = PhaseChain(tmp_path / "s.json", key="k").run([("a", lambda: {}), ("b", unsure)])
    assert verdict_of(out) == "inconclusive"
