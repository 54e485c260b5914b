"""Canonical JSON vectors and digest helpers."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from releases.canonical import canonical_json, digest, file_sha256, load_json_bytes, sha256_hex
from releases.errors import RecordError


@pytest.mark.parametrize("obj, expected", [
    ({}, b"{}"),
    ([], b"[]"),
    ({"b": 1, "a": [1, 2, {"d": None, "c": "\u00e9"}]}, b'{"a":[1,2,{"c":"\xc3\xa9","d":null}],"b":1}'),
    ({"z": True, "Z": False, "a": 1.5}, b'{"Z":false,"a":1.5,"z":true}'),
    ("line\nbreak\"quote", b'"line\\nbreak\\"quote"'),
    ({"emoji": "\U0001f600"}, b'{"emoji":"\xf0\x9f\x98\x80"}'),
    ({"ctl": "\x01"}, b'{"ctl":"\\u0001"}'),
])
def test_canonical_vectors(obj, expected):
    assert canonical_json(obj) == expected


def test_rfc8785_key_order_is_by_utf16_code_units():
    # The sorting example of RFC 8785 section 3.2.3: U+1F600 (a surrogate pair, D83D) sorts before U+FB33.
    obj = {"\u20ac": "Euro", "\r": "CR", "\ufb33": "Hebrew", "1": "One", "\U0001f600": "Smiley",
           "\u0080": "Control", "\u00f6": "Latin"}
    keys = list(load_json_bytes(canonical_json(obj)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert sorted(obj) != keys  # Python's code-point order differs: this is why rfc8785 is used


@pytest.mark.parametrize("number, text", [(1e30, b"1e+30"), (4.50, b"4.5"), (0.002, b"0.002"), (1e-27, b"1e-27"),
                                          (-0.0, b"0"), (1.0, b"1"), (2**53 - 1, b"9007199254740991")])
def test_rfc8785_numbers_in_ecmascript_form(number, text):
    assert canonical_json(number) == text


def test_integers_beyond_ijson_are_refused():
    with pytest.raises(RecordError, match="cannot canonicalise"):
        canonical_json({"n": 2**53})


def test_key_order_does_not_change_digest():
    assert digest({"a": 1, "b": [2, 3]}) == digest({"b": [2, 3], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})


def test_known_digests():
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert digest({}) == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"x": math.inf}, {1: "int key"}, {"x": {2: 3}}, {"x": object()}])
def test_uncanonicalisable_values_raise(bad):
    with pytest.raises(RecordError):
        canonical_json(bad)


def test_nested_int_key_error_names_the_path():
    with pytest.raises(RecordError) as info:
        canonical_json({"outer": {"inner": {7: 1}}})
    assert info.value.where == "/outer/inner"


def test_file_sha256(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc" * 1_000_000)
    assert file_sha256(path) == sha256_hex(b"abc" * 1_000_000)


@pytest.mark.parametrize("data, fragment", [
    (b'{"a":1,"a":2}', "duplicate key 'a'"),
    (b'{"a":NaN}', "NaN is not JSON"),
    (b"\xff", "not UTF-8"),
    (b"{", "not JSON"),
])
def test_strict_loading(data, fragment):
    with pytest.raises(RecordError, match=fragment) as info:
        load_json_bytes(data, where="x.json")
    assert info.value.where == "x.json"


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_canonical_round_trips_and_is_a_fixed_point(obj):
    data = canonical_json(obj)
    back = load_json_bytes(data)
    assert back == obj
    assert canonical_json(back) == data
