"""gates reads checkpoints back under the engine's tenant-scoped session name; it computes that
name from the documented rule (docs/API.md, Tenancy) without importing the engine. This pins the
two to each other: if the engine's rule changes, this fails before a lane does."""

from engine.server.tenancy import session_key, tenant_id
from gates.native.restart import engine_session


def test_the_lane_names_sessions_exactly_as_the_engine_scopes_them():
    for key, session in [("k" * 48, "restart-main"), ("an API key", "x/y"), ("ünï", "s")]:
        assert engine_session(key, session) == session_key(tenant_id(key), session)
    assert engine_session("a", "s") != engine_session("b", "s")
