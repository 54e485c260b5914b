"""Flow tests use the real Prefect server fixture."""

from tests.prefect_fixtures import engine_repo, engine_repo_no_kernels, prefect_api  # noqa: F401
