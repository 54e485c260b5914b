"""Public records hold no host paths: scrubbing replaces known roots and any absolute path
under a well-known top-level folder, and leaves API routes and URLs alone."""

from __future__ import annotations

from gates.public import host_paths, scrub, scrub_text


def test_scrub_replaces_roots_then_other_absolute_paths():
    text = "File /home/someone/src/assay/.assay/work/x/venv/lib/engine/a.py, line 3; tmp /tmp/q/r.json"
    out = scrub_text(text, [("/home/someone/src/assay/.assay/work/x", "<workdir>")])
    assert out == "File <workdir>/venv/lib/engine/a.py, line 3; tmp <path>"
    assert scrub_text("GET /v1/models then http://127.0.0.1:8000/v1/chat/completions") == \
        "GET /v1/models then http://127.0.0.1:8000/v1/chat/completions"


def test_host_paths_points_at_each_leak():
    record = {"facts": {"a": "ok", "b": ["x", "/root/.cache/key"], "c": {"d": "/work/repo/file"}}, "route": "/v1/models"}
    assert host_paths(record) == ["/facts/b/1", "/facts/c/d"]
    assert host_paths(scrub(record)) == []
