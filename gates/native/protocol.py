"""protocol: authenticated 200 and anonymous/wrong-key 401, /v1/models identity, chat streamed
equal to non-streamed, responses lineage through previous_response_id, and every documented
error code that a bad input provokes, each returned for its input with the documented shape."""

from __future__ import annotations

from gates.phases import PhaseFailed


def run(rt) -> dict:
    out = rt.probe("protocol", rt.http({"tokens": rt.spec.setting("protocol_tokens"),
                                        "max_context": rt.spec.setting("max_context"),
                                        "max_request_bytes": 262144}))
    checks = out["checks"]
    failed = [c["name"] for c in checks if not c["ok"]]
    facts = {"checks": checks, "passed": len(checks) - len(failed), "total": len(checks),
             "error_codes_probed": sorted(c["name"][6:] for c in checks if c["name"].startswith("error:")),
             "error_codes_elsewhere": out["not_probed_here"],
             "identity": {k: out["identity"].get(k) for k in ("engine_version", "package_sha256", "model_sha256",
                                                               "profile_sha256")}}
    if failed:
        raise PhaseFailed(f"{len(failed)} protocol check(s) failed: {', '.join(failed)}", facts)
    return facts
