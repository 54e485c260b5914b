"""client-turn and security on the tiny model: the official openai client completes a streamed
turn and a responses continuation; the state root is private and the API key is in no file.

An API-key file that others can read must be refused by the engine (exit 2)."""

from __future__ import annotations

import pytest

from gates.qualify import qualify
from hosts.local import LocalHost
from tests.gates.conftest import smoke_spec


@pytest.mark.slow
def test_client_turn_with_the_openai_client(tmp_path, engine_wheel, candidate, signing_key):
    result = qualify(LocalHost(), smoke_spec(tmp_path, phases=["client-turn"]), candidate, engine_wheel,
                     tmp_path / "out", key=signing_key)
    facts = {o.name: o for o in result.phases}["client-turn"].facts
    assert result.verdict == "pass", facts
    assert facts["client"].startswith("openai ") and facts["chat_chunks"] >= 1
    assert facts["second_previous_id_matches"] is True and facts["second_input_tokens"] >= facts["first_total_tokens"]


@pytest.mark.slow
def test_security_checks_the_state_root_the_key_file_and_the_logs(tmp_path, engine_wheel, candidate, signing_key):
    result = qualify(LocalHost(), smoke_spec(tmp_path, phases=["security"]), candidate, engine_wheel,
                     tmp_path / "out", key=signing_key)
    security = {o.name: o for o in result.phases}["security"]
    facts = security.facts
    assert facts["state_entries"] >= 3 and facts["state_open_to_others"] == 0
    assert facts["files_scanned_for_key"] >= 2 and facts["files_with_key"] == 0
    assert facts["loose_key_file_refused"] is True and facts["loose_key_file_exit_code"] == 2, facts
    assert security.status == "pass" and result.verdict == "pass"
    assert {o.name: o for o in result.phases}["restore"].facts["audit"]["ok"] is True
