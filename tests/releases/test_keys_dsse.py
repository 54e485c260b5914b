"""Ed25519 key files, DSSE signing and in-toto receipts: round trip and tampering."""
from __future__ import annotations

import base64
import copy
import os
import stat

import pytest

from releases import dsse, keys
from releases.errors import KeyFileError, RecordError, SchemaError
from releases.receipts import PREDICATE_TYPES, STATEMENT_TYPE, open_receipt, sign_receipt
from tests.releases.test_schema import LANE

SUBJECT = [{"name": "x.whl", "digest": {"sha256": "d" * 64}}]


@pytest.fixture
def key(tmp_path):
    path, created = keys.ensure_local_key(tmp_path / "k")
    assert created
    return keys.load_private_key(path)


def test_key_files_modes_and_reuse(tmp_path):
    path, created = keys.ensure_local_key(tmp_path / "k")
    assert created and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    pub = tmp_path / "k" / keys.PUBLIC_NAME
    assert pub.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    again, created_again = keys.ensure_local_key(tmp_path / "k")
    assert again == path and not created_again
    k = keys.load_private_key(path)
    assert keys.key_id(keys.load_public_key(pub)) == keys.key_id(k.public_key())
    assert len(keys.key_id(k.public_key())) == 64
    assert sorted(os.listdir(tmp_path / "k")) == [keys.PRIVATE_NAME, keys.PUBLIC_NAME]  # no temp left


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_widely_readable_private_key_is_refused(tmp_path, mode):
    path, _ = keys.ensure_local_key(tmp_path / "k")
    os.chmod(path, mode)
    with pytest.raises(KeyFileError, match=f"mode {mode:04o}"):
        keys.load_private_key(path)


def test_bad_key_files(tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    os.chmod(bad, 0o600)
    with pytest.raises(KeyFileError, match="bad.pem"):
        keys.load_private_key(bad)
    with pytest.raises(KeyFileError, match="bad.pem"):
        keys.load_public_key(bad)
    with pytest.raises(KeyFileError, match="cannot stat"):
        keys.load_private_key(tmp_path / "absent.pem")


def test_public_key_from_text_and_bytes(key):
    pem = keys.public_pem(key.public_key())
    for form in (pem, pem.decode()):
        assert keys.key_id(keys.load_public_key(form)) == keys.key_id(key.public_key())


def test_pae_vector():
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_dsse_round_trip_and_tamper(key, tmp_path):
    env = dsse.sign(b'{"x":1}', dsse.MANIFEST_PAYLOAD_TYPE, key)
    assert dsse.verify(env, key.public_key()) == b'{"x":1}'
    tampered = dict(env, payload=base64.b64encode(b'{"x":2}').decode())
    with pytest.raises(RecordError, match="no valid signature"):
        dsse.verify(tampered, key.public_key())
    retyped = dict(env, payloadType=dsse.INTOTO_PAYLOAD_TYPE)
    with pytest.raises(RecordError, match="no valid signature"):
        dsse.verify(retyped, key.public_key())  # the type is signed too (PAE)
    other = keys.load_private_key(keys.ensure_local_key(tmp_path / "other")[0])
    with pytest.raises(RecordError, match="no valid signature"):
        dsse.verify(env, other.public_key())
    with pytest.raises(RecordError, match="expected 'application/vnd.in-toto"):
        dsse.verify(env, key.public_key(), payload_type=dsse.INTOTO_PAYLOAD_TYPE)


def test_receipt_round_trip(key):
    env = sign_receipt("lane", SUBJECT, LANE, key)
    assert env["payloadType"] == "application/vnd.in-toto+json"
    stmt, pred = open_receipt(env, key.public_key(), "lane")
    assert stmt["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
    assert stmt["predicateType"] == PREDICATE_TYPES["lane"] == "https://assay.dev/predicates/lane/v1"
    assert PREDICATE_TYPES["build"] == "https://slsa.dev/provenance/v1"
    assert stmt["subject"] == SUBJECT and pred == LANE


def test_receipt_kind_mismatch_and_bad_predicate(key):
    env = sign_receipt("lane", SUBJECT, LANE, key)
    with pytest.raises(RecordError, match="lane receipt, expected approval"):
        open_receipt(env, key.public_key(), "approval")
    bad = copy.deepcopy(LANE)
    bad["verdict"] = "great"
    with pytest.raises(SchemaError) as info:
        sign_receipt("lane", SUBJECT, bad, key)
    assert info.value.path == "/verdict"
    with pytest.raises(SchemaError) as info:
        sign_receipt("lane", [{"name": "x", "digest": {"sha256": "short"}}], LANE, key)
    assert info.value.path.startswith("/subject/0/digest")
