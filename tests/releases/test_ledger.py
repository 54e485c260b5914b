"""The review ledger: closure rule, dispositions, binding to the candidate, the reviewers' TOML
file, the default ledger, the summary and the `assay review` commands."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from releases import exit_codes
from releases.candidate import candidate_ref
from releases.errors import RecordError, SchemaError
from releases.ledger import (NO_REVIEW_STATEMENT, bind_ledger, check_ledger, closure_problems, default_ledger,
                             is_unreviewed, ledger_summary, load_ledger_file, load_review_toml, new_ledger)
from releases.ledger_edits import add_item, add_round, close, disposition, dispose
from releases.review_cli import app as review_app
from tests.releases.fixtures import COMMIT, T1, candidate_record

REF = candidate_ref(candidate_record())
OTHER = candidate_ref(candidate_record(commit="9" * 40))

TOML = """\
review_id = "rc-1.2.3"
base = "{base}"

[[seats]]
role = "kernels"
reviewer = "reviewer-a"

[[seats]]
role = "security"

[[rounds]]
round = 1
completed = 1
missing = 1
aborted = 0

[[items]]
id = "R1"
title = "bounds check in the decode kernel"
priority = "P1"
in_scope = true
seat = "security"
disposition = {disposition}

[closure]
by = "release-manager"
at = 2026-01-02T03:14:05Z
statement = "reviewed"
"""


def _toml(tmp_path, disposition='{ status = "open" }', name="review.toml"):
    text = TOML.format(base="0" * 40, disposition=disposition)
    path = tmp_path / name
    path.write_text(text)
    return path


def _open_p1() -> dict:
    led = new_ledger(REF, review_id="rc-1", base="0" * 40, seats=[{"role": "kernels"}])
    return add_item(led, id="R7", title="use-after-free in the block manager", priority="P1")


def test_an_open_in_scope_p1_blocks_closure_and_deferring_it_clears(tmp_path):
    led = _open_p1()
    problems = closure_problems(led)
    assert problems[0] == "item R7 (P1, in scope) is open: use-after-free in the block manager"
    assert "has no closure" in problems[1]
    with pytest.raises(RecordError, match="cannot close: item R7 \\(P1, in scope\\) is open"):
        close(led, by="lead", statement="done", at=T1)
    led = dispose(led, "R7", disposition("deferred", issue="#42"))
    assert closure_problems(led) == ["review rc-1 has no closure by its accountable lead"]
    led = close(led, by="lead", statement="deferred to #42", at=T1)
    assert closure_problems(led) == []
    # The same through the reviewers' TOML file: a closed file with the item open is not closed...
    assert closure_problems(load_review_toml(_toml(tmp_path), REF)) == [
        "item R1 (P1, in scope) is open: bounds check in the decode kernel"]
    # ... and deferring it with an issue reference clears the problem.
    deferred = load_review_toml(_toml(tmp_path, '{ status = "deferred", issue = "owner/repo#17" }'), REF)
    assert closure_problems(deferred) == []
    assert deferred["items"][0]["disposition"] == {"status": "deferred", "issue": "owner/repo#17"}


def test_what_does_not_block_closure():
    led = new_ledger(REF, review_id="rc-1", base=None)
    led = add_item(led, id="A", title="open but low priority", priority="P2")
    led = add_item(led, id="B", title="open but out of scope", priority="P0", in_scope=False)
    led = add_item(led, id="C", title="fixed", priority="P0", disposition=disposition("fixed", commit="4" * 40))
    assert closure_problems(close(led, by="lead", statement="ok", at=T1)) == []


def test_dispositions_need_their_evidence():
    with pytest.raises(RecordError, match="disposition accepted-risk needs a reason"):
        disposition("accepted-risk", by="lead")
    with pytest.raises(RecordError, match="disposition deferred needs an issue reference"):
        disposition("deferred")
    with pytest.raises(RecordError, match="disposition fixed needs evidence"):
        disposition("fixed")
    with pytest.raises(RecordError, match="takes no issue"):
        disposition("fixed", commit="4" * 40, issue="#1")
    led = _open_p1()
    # A blank reason is no reason: the schema wants a non-space character.
    with pytest.raises(SchemaError) as info:
        dispose(led, "R7", disposition("accepted-risk", reason="   ", by="lead"))
    assert info.value.path == "/items/0/disposition/reason"
    with pytest.raises(SchemaError) as info:
        dispose(led, "R7", disposition("deferred", issue="later"))
    assert info.value.path == "/items/0/disposition/issue"
    ok = dispose(led, "R7", disposition("accepted-risk", reason="only reachable by the operator", by="lead"))
    assert ok["items"][0]["disposition"] == {"status": "accepted-risk", "reason": "only reachable by the operator",
                                             "by": "lead"}
    with pytest.raises(RecordError, match="no item 'R8'"):
        dispose(led, "R8", disposition("open"))


def test_accepted_risk_without_a_reason_in_toml_names_the_file_and_key(tmp_path):
    path = _toml(tmp_path, '{ status = "accepted-risk", by = "release-manager" }')
    with pytest.raises(SchemaError) as info:
        load_review_toml(path, REF)
    assert info.value.where == str(path)
    assert info.value.path == "/items/0/disposition"
    assert "'reason' is a required property" in str(info.value) and str(path) in str(info.value)


def test_another_candidates_ledger_is_refused(tmp_path):
    led = _open_p1()
    assert bind_ledger(led, REF) is led
    with pytest.raises(RecordError, match="ledger record names another candidate"):
        bind_ledger(led, OTHER)
    # A ledger of the right candidate that reviewed another head is no review of this candidate.
    with pytest.raises(RecordError, match="reviewed head 9{40}, not the candidate's commit"):
        bind_ledger(new_ledger(REF, review_id="rc-1", base=None, head="9" * 40), REF)
    # A TOML file that names its candidate must name this one.
    path = tmp_path / "named.toml"
    path.write_text(_toml(tmp_path).read_text() + "\n[candidate]\nid = \"%s\"\ncommit = \"%s\"\ntree = \"%s\"\n"
                    % (OTHER["id"], OTHER["commit"], OTHER["tree"]))
    with pytest.raises(RecordError, match="names another candidate") as info:
        load_review_toml(path, REF)
    assert info.value.where == str(path)


@pytest.mark.parametrize("change, pointer, expected", [
    ({'priority = "P1"': 'priority = "P5"'}, "/items/0/priority", "'P5' is not one of ['P0', 'P1', 'P2', 'P3']"),
    ({'in_scope = true': 'in_scope = "yes"'}, "/items/0/in_scope", "'yes' is not of type 'boolean'"),
    ({'role = "security"': 'role = "security"\nchair = true'}, "/seats/1", "'chair' was unexpected"),
    ({'base = "' + "0" * 40: 'base = "main'}, "/base", "'main' does not match '^[0-9a-f]{40}$'"),
])
def test_malformed_toml_names_file_key_and_expectation(tmp_path, change, pointer, expected):
    text = TOML.format(base="0" * 40, disposition='{ status = "open" }')
    for old, new in change.items():
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "review.toml"
    path.write_text(text)
    with pytest.raises(SchemaError) as info:
        load_review_toml(path, REF)
    assert (info.value.kind, info.value.where, info.value.path) == ("ledger", str(path), pointer)
    assert expected in info.value.message


def test_unreadable_toml_is_a_typed_error_naming_the_file_and_place(tmp_path):
    path = tmp_path / "review.toml"
    path.write_text('review_id = "rc-1"\n[[items]\nid = 1\n')
    with pytest.raises(RecordError) as info:
        load_review_toml(path, REF)
    assert info.value.where == str(path) and "not valid TOML" in info.value.message and "line 2" in info.value.message
    naive = _toml(tmp_path, name="naive.toml").read_text().replace("03:14:05Z", "03:14:05")
    path.write_text(naive)
    with pytest.raises(RecordError, match="at /closure/at: date-time 2026-01-02T03:14:05 has no UTC offset"):
        load_review_toml(path, REF)
    with pytest.raises(RecordError, match="cannot read review file") as info:
        load_review_toml(tmp_path / "absent.toml", REF)
    assert info.value.where == str(tmp_path / "absent.toml")


def test_rules_the_schema_cannot_state(tmp_path):
    led = _open_p1()
    twice = json.loads(json.dumps(led))
    twice["items"].append(dict(twice["items"][0]))
    with pytest.raises(RecordError, match="/items: id 'R7' appears twice"):
        check_ledger(twice)
    with pytest.raises(RecordError, match="/items/1/seat: 'docs' is not one of the seats \\(kernels\\)"):
        add_item(led, id="R8", title="t", priority="P3", seat="docs")
    with pytest.raises(RecordError, match="completed \\+ missing \\+ aborted = 2, expected 1"):
        add_round(led, completed=1, aborted=1)
    closed = close(dispose(led, "R7", disposition("deferred", issue="#1")), by="lead", statement="ok", at=T1)
    with pytest.raises(RecordError, match="closed by lead at 2026-01-02T03:14:05Z; a closed ledger does not change"):
        add_item(closed, id="R9", title="late", priority="P3")


def test_default_ledger_says_no_review_took_place():
    led = default_ledger(REF, at=T1)
    assert bind_ledger(led, REF) is led
    assert (led["items"], led["seats"], led["rounds"], led["base"]) == ([], [], [], None)
    assert led["closure"] == {"by": "pipeline", "at": T1, "statement": NO_REVIEW_STATEMENT}
    assert closure_problems(led) == [] and is_unreviewed(led)
    summary = ledger_summary(led)
    assert "No reviewer supplied a ledger for this candidate: no review items were recorded" in summary
    assert not is_unreviewed(_open_p1())


def test_summary_shows_state_items_and_closure():
    led = _open_p1()
    summary = ledger_summary(led)
    assert "`rc-1`: NOT closed" in summary
    assert "| R7 | P1 | in scope | **open** | use-after-free in the block manager |" in summary
    assert "- **blocking:** item R7 (P1, in scope) is open" in summary
    led = close(dispose(add_round(led, completed=1), "R7", disposition("fixed", commit="4" * 40)),
                by="lead", statement="fixed in | main", at=T1)
    summary = ledger_summary(led)
    assert "`rc-1`: closed" in summary and "fixed (commit `444444444444`)" in summary
    assert "- round 1: 1 completed, 0 missing, 0 aborted" in summary
    assert "Closed by lead at 2026-01-02T03:14:05Z: fixed in \\| main" in summary and "blocking" not in summary


def _run(*args):
    result = CliRunner().invoke(review_app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


def test_review_commands_create_update_and_close(tmp_path, published_release):
    cand, led = published_release.root / "candidate.json", tmp_path / "ledger.json"
    assert _run("new", led, "--candidate", cand, "--review-id", "rc-9", "--base", "0" * 40,
                "--seat", "kernels:reviewer-a", "--seat", "security").exit_code == exit_codes.OK
    assert _run("new", led, "--candidate", cand, "--review-id", "rc-9").exit_code == exit_codes.USAGE
    assert _run("add-item", led, "R1", "--title", "race in the scheduler", "--priority", "P1",
                "--seat", "kernels").exit_code == exit_codes.OK
    assert _run("round", led, "--completed", "2").exit_code == exit_codes.OK
    check = _run("check", led)
    assert check.exit_code == exit_codes.FAILED and "item R1 (P1, in scope) is open" in check.output
    refused = _run("close", led, "--by", "lead", "--statement", "done")
    assert refused.exit_code == exit_codes.FAILED and "R1" in refused.output
    bad = _run("dispose", led, "R1", "accepted-risk", "--by", "lead")
    assert bad.exit_code == exit_codes.BAD_INPUT and "needs a reason" in bad.output
    assert _run("dispose", led, "R1", "deferred", "--issue", "#88").exit_code == exit_codes.OK
    assert _run("close", led, "--by", "lead", "--statement", "deferred", "--at", T1).exit_code == exit_codes.OK
    assert _run("check", led).exit_code == exit_codes.OK
    record = bind_ledger(json.loads(led.read_text()), published_release.candidate_ref)
    assert record["head"] == COMMIT and record["seats"][0] == {"role": "kernels", "reviewer": "reviewer-a"}
    assert record["items"][0]["disposition"] == {"status": "deferred", "issue": "#88"}
    assert record["closure"] == {"by": "lead", "at": T1, "statement": "deferred"}
    shown = _run("show", led)
    assert shown.exit_code == exit_codes.OK and shown.output == ledger_summary(record)


def test_review_import_validates_the_toml_file(tmp_path, published_release):
    cand, out = published_release.root, tmp_path / "ledger.json"
    good = _toml(tmp_path, '{ status = "fixed", commit = "%s" }' % ("4" * 40))
    result = _run("import", good, "--candidate", cand, "--out", out)
    assert result.exit_code == exit_codes.OK
    assert json.loads(out.read_text()) == load_review_toml(good, published_release.candidate_ref)
    assert _run("check", good, "--candidate", cand).exit_code == exit_codes.OK
    assert _run("check", good).exit_code == exit_codes.USAGE
    edit = _run("add-item", good, "R9", "--title", "t", "--priority", "P3")
    assert edit.exit_code == exit_codes.USAGE and "import" in edit.output
    bad = _toml(tmp_path, name="bad.toml").read_text().replace('priority = "P1"', 'priority = "urgent"')
    (tmp_path / "bad.toml").write_text(bad)
    result = _run("import", tmp_path / "bad.toml", "--candidate", cand, "--out", tmp_path / "bad.json")
    assert result.exit_code == exit_codes.BAD_INPUT
    assert "bad.toml" in result.output and "/items/0/priority" in result.output and "P0" in result.output
    assert not (tmp_path / "bad.json").exists()


def test_the_documented_example_is_a_closed_review(tmp_path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "REVIEW.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.S).group(1)
    path = tmp_path / "review.toml"
    path.write_text(example)
    led = load_review_toml(path, REF)
    assert [i["disposition"]["status"] for i in led["items"]] == ["fixed", "deferred", "accepted-risk"]
    assert closure_problems(led) == [] and not is_unreviewed(led)


def test_load_ledger_file_reads_toml_or_json_and_binds(tmp_path):
    toml_path = _toml(tmp_path, '{ status = "deferred", issue = "#17" }')
    led = load_ledger_file(toml_path, REF)
    json_path = tmp_path / "ledger.json"
    json_path.write_text(json.dumps(led))
    assert load_ledger_file(json_path, REF) == led
    with pytest.raises(RecordError, match="names another candidate") as info:
        load_ledger_file(json_path, OTHER)
    assert info.value.where == str(json_path)
    json_path.write_text("{")
    with pytest.raises(RecordError, match="not JSON") as info:
        load_ledger_file(json_path, REF)
    assert info.value.where == str(json_path)
