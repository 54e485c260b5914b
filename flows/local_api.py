"""Point the CLI at the Prefect server `make run` started, when nothing else is configured.

Prefect reads its settings when it is first imported, so this runs before any Prefect import."""

from __future__ import annotations

import os


def use_local_server_if_unset() -> str | None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if os.environ.get("PREFECT_API_URL"):
        return None
    from flows.config import ConfigError, load_config
    from flows.services import running

    try:
        state = load_config().state_dir
    except ConfigError:
        return None
    server = running(state / "run", "prefect-server")
    if server and server.url:
        os.environ["PREFECT_API_URL"] = server.url
        os.environ.setdefault("PREFECT_HOME", str(state / "prefect"))
        return server.url
    return None
