"""cpu-reference, the whole native chain at full size, on this machine: the candidate's wheel
serving the real reference model (make model). Context prompts reach at least 7,000 tokens with
an exact answer at three depths; the restored continuation equals a true-cold run token for token."""

from __future__ import annotations

import pytest

from gates.kinds import NATIVE_CHAIN
from gates.qualify import qualify
from hosts.local import LocalHost
from tests.gates.conftest import reference_spec


@pytest.mark.slow
@pytest.mark.timeout(5400)   # the whole chain at full size: tens of minutes on a loaded 2-core machine
def test_reference_lane_runs_the_whole_chain(tmp_path, engine_wheel, candidate, signing_key):
    lines = []
    # Full sizes; only the hold cap is raised: on a shared 2-core machine the chain can take longer
    # than the lane's operational cap, which this test does not judge.
    result = qualify(LocalHost(), reference_spec(tmp_path, max_hold_s=7200), candidate, engine_wheel, tmp_path / "out",
                     key=signing_key, progress=lines.append)
    facts = {o.name: o.facts for o in result.phases}
    assert [o.name for o in result.phases] == list(NATIVE_CHAIN)
    context = facts["context"]
    assert context["prompt_tokens_min"] >= 7000 and context["depths"] >= 3, context
    assert context["exact"] == context["depths"], context
    assert all(t["exact"] and t["prompt_tokens"] >= 7000 for t in context["trials"])
    restart = facts["restart"]
    assert restart["token_ids_equal"] is True and restart["utf8_bytes_equal"] is True, restart
    assert facts["restore"]["audit"]["ok"] is True and facts["restore"]["held_s"] <= facts["restore"]["max_hold_s"]
    assert facts["security"]["loose_key_file_refused"] is True, facts["security"]
    assert result.verdict == "pass", [(o.name, o.status, o.facts.get("reason")) for o in result.phases]
