"""cpu-smoke end to end on this machine: the candidate's wheel installed in a fresh venv, the
tiny model served by it, the short chain run over HTTP; every phase leaves a signed receipt, the
lane receipt binds them by digest, the host is restored and audited, and no record holds a host
path."""

from __future__ import annotations

import json
import re

import pytest

from gates.qualify import qualify
from hosts.local import LocalHost
from releases.canonical import sha256_hex
from releases.markers import scan_text
from releases.receipts import open_receipt
from tests.gates.conftest import smoke_spec

ABSOLUTE = re.compile(r"(?<![\w.:/])/(home|root|tmp|var|usr|opt|work|mnt|srv|etc|Users)/")


@pytest.mark.slow
def test_cpu_smoke_chain_passes_with_a_receipt_per_phase(tmp_path, engine_wheel, candidate, signing_key):
    lines = []
    result = qualify(LocalHost(), smoke_spec(tmp_path), candidate, engine_wheel, tmp_path / "out", key=signing_key,
                     progress=lines.append)
    assert result.verdict == "pass", [(o.name, o.status, o.facts.get("reason")) for o in result.phases]
    names = ["preflight", "install", "startup-fit", "protocol", "restart", "benchmark", "restore"]
    assert [o.name for o in result.phases] == names
    assert [label for kind, label, _ in result.receipts] == [f"cpu-smoke/{n}" for n in names] + ["cpu-smoke"]

    facts = {o.name: o.facts for o in result.phases}
    assert facts["install"]["package_sha256"] == facts["install"]["wheel_package_sha256"]
    assert facts["startup-fit"]["oversize_exit_code"] == 2 and facts["startup-fit"]["admission"]["admitted"] is True
    assert facts["protocol"]["passed"] == facts["protocol"]["total"] >= 20
    assert facts["restart"]["token_ids_equal"] is True and facts["restart"]["utf8_bytes_equal"] is True
    assert facts["restart"]["restored_cached_tokens"] > 0 and facts["restart"]["tampered_checkpoint_status"] == "corrupt"
    bench = facts["benchmark"]
    assert bench["ok_runs"] == 3 and bench["decode_tok_s_median"] > 0
    # Decode speed from each run's fastest long and fastest short stream: token difference over
    # end-time difference.
    for r in bench["runs"]:
        assert len(r["streams"]) == len(r["short_streams"]) == 3
        assert r["total_s"] == min(t for _, t in r["streams"]) and r["short"]["total_s"] == min(t for _, t in r["short_streams"])
        dn = r["completion_tokens"] - r["short"]["completion_tokens"]
        assert dn > 0 and r["decode_tok_s"] == round(dn / (r["total_s"] - r["short"]["total_s"]), 2)
    assert bench["decode"] == {"cuda_graphs": False, "cuda_graph_error": None, "persistent_decode": False,
                               "persistent_decode_off": None}
    restore = facts["restore"]
    assert restore["restored"] is True and restore["audit"]["ok"] is True
    assert 0 < restore["held_s"] <= restore["max_hold_s"]

    public = signing_key.public_key()
    digests = {}
    for kind, label, path in result.receipts:
        raw = path.read_bytes()
        stmt, pred = open_receipt(json.loads(raw), public, kind)
        assert stmt["subject"][0]["digest"]["sha256"] == result.record["artifact"]["sha256"]
        digests[label] = sha256_hex(raw)
        payload = json.dumps(stmt)
        # No host path of any kind: not the test's folders, not a home directory, no absolute path.
        assert str(tmp_path) not in payload and not ABSOLUTE.search(payload), (label, ABSOLUTE.search(payload))
        assert scan_text(payload) == [], label
    bound = {e["label"]: e["sha256"] for e in result.record["phase_receipts"]}
    assert bound == {label: digests[label] for label in bound} and len(bound) == len(names)
    # The window's working directory and every process of it are gone.
    assert not (tmp_path / "out" / "work").joinpath("cpu-smoke").exists()
