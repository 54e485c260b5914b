"""Flow tests use the real Prefect server fixture."""

from tests.prefect_fixtures import engine_repo, prefect_api  # noqa: F401
