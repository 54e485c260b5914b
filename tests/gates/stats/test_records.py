import hashlib
import json

import pytest
from releases.errors import SchemaError
from releases.schema import validate

from gates.stats import judge_abba, judge_determinism, judge_latency
from gates.stats.canonical import PACKAGE_DIR, code_digest, digest
from tests.gates.stats.inputs import CANDIDATE, abba_case, even, sha


def test_verdicts_validate_and_carry_candidate_and_digests():
    data = {"candidate": CANDIDATE, "cases": [abba_case("c", even(1, 1))]}
    r = judge_abba(data)
    assert validate("verdict-abba", r) is r
    assert r["candidate"] == CANDIDATE and r["input_sha256"] == digest(data)
    assert r["kind"] == "verdict-abba" and r["schema"] == "assay/verdict-abba/v1"
    no_candidate = judge_latency({"positions": [{"id": 0, "incumbent_s": 1.0, "candidate_s": 1.0}]})
    assert "candidate" not in no_candidate


def test_schema_rejects_a_verdict_outside_the_enum():
    r = judge_determinism({"runs": [[{"prompt": 0, "output_sha256": sha("a")}]] * 2})
    with pytest.raises(SchemaError) as exc:
        validate("verdict-determinism", {**r, "verdict": "maybe"})
    assert exc.value.path == "/verdict"


def test_code_digest_covers_every_source_file_of_the_package():
    files = sorted(p for p in PACKAGE_DIR.rglob("*") if p.suffix in {".py", ".json"} and "__pycache__" not in p.parts)
    names = {p.relative_to(PACKAGE_DIR).as_posix() for p in files}
    assert {"abba.py", "bootstrap.py", "noninferiority.py", "schemas/input-abba.schema.json"} <= names
    table = {p.relative_to(PACKAGE_DIR).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    canonical = json.dumps(table, sort_keys=True, separators=(",", ":")).encode()
    assert code_digest() == hashlib.sha256(canonical).hexdigest()


def test_a_verdict_signs_as_a_receipt_and_opens_again():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from releases.receipts import PREDICATE_TYPES, open_receipt, sign_receipt

    key = Ed25519PrivateKey.generate()
    verdict = judge_abba({"candidate": CANDIDATE, "cases": [abba_case("c", even(1, 1))]})
    envelope = sign_receipt("verdict-abba", [{"name": "abba", "digest": {"sha256": verdict["input_sha256"]}}],
                            verdict, key)
    statement, predicate = open_receipt(envelope, key.public_key(), expected_kind="verdict-abba")
    assert predicate == verdict
    assert statement["predicateType"] == PREDICATE_TYPES["verdict-abba"]
    assert statement["predicateType"].endswith("/verdict-abba/v1")
