"""How a run survives its worker: every step's result is persisted, and cached by its inputs.

A run whose worker died (or that was suspended for approval) starts its flow body again from the
top on whatever worker picks it up; each step then finds its result under the same key and is
not run again, so only the unfinished step does work. The key is the step's inputs (the config,
the run's workspace, the candidate record, the lane, the builds ...) and its source: the
workspace names the flow run, so a result is reused only by the same run (a retry or a resume)
and never by another run that would lack what the first one staged in its own workspace.

Results go to Prefect's local result storage, which `make run` and the worker it starts put
under the state directory (flows/services.py, PREFECT_LOCAL_STORAGE_PATH)."""

from __future__ import annotations

from prefect.cache_policies import INPUTS, TASK_SOURCE

RESUMABLE = INPUTS + TASK_SOURCE

# The options every step of the release flow carries (@task(**PERSISTED)).
PERSISTED = {"persist_result": True, "cache_policy": RESUMABLE}
