"""The benchmark probe's choice of stream (gates/probes/bench.py): of a run's repeats, the fastest
of those that ran to the most tokens, so a stream a busy host delayed, or a reply that stopped
early, never sets the decode speed. The whole probe runs against a served engine in
test_qualify_smoke.py; this pins the choice on streams whose times are known."""

from __future__ import annotations

import sys

import pytest

from gates.runtime import PROBES
from tests.script_module import load_script


@pytest.fixture(scope="module")
def fastest_full():
    # The probe imports its siblings (wire, context) by their bare names, as on a lane host; they
    # leave sys.modules again so no other test meets them under those names.
    before = set(sys.modules)
    sys.path.insert(0, str(PROBES))
    try:
        return load_script(PROBES / "bench.py", "bench_probe")._fastest_full
    finally:
        sys.path.remove(str(PROBES))
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "")).startswith(str(PROBES)):
                del sys.modules[name]


def stream(tokens, total):
    return {"completion_tokens": tokens, "total_s": total}


def test_the_fastest_stream_is_chosen(fastest_full):
    # The middle repeat was held up 40 ms: the minimum ignores it.
    assert fastest_full([stream(32, 0.052), stream(32, 0.091), stream(32, 0.047)]) == stream(32, 0.047)


def test_a_reply_that_stopped_early_is_not_chosen_however_fast(fastest_full):
    assert fastest_full([stream(32, 0.052), stream(5, 0.020), stream(32, 0.061)]) == stream(32, 0.052)
