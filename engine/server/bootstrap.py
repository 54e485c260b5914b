"""Building a ServerState from a profile: verify the model, admit, load the engine."""
from __future__ import annotations

from pathlib import Path

import engine
from engine.server import identity as ident
from engine.server.admission import MIB, AdmissionRefused, admit
from engine.server.auth import Authenticator, read_keys
from engine.server.chat_format import stop_token_ids
from engine.server.checkpoints import CheckpointStore, origin_key
from engine.server.metrics import ServerMetrics
from engine.server.profile import Profile
from engine.server.request_log import RequestLog
from engine.server.response_store import ResponseStore
from engine.server.state import ServerState


class StartupError(RuntimeError):
    """The server cannot start with this profile; says which setting and why."""


def install_kernels(artifact: str | None) -> None:
    """Shipped AOT kernels first, JIT on a miss (engine.kernels.aot); before anything compiles."""
    from engine.kernels.aot import KernelsUnavailable, use
    try:
        use(artifact)
    except KernelsUnavailable as e:
        raise StartupError(str(e)) from None


def build_state(profile: Profile, kernels: str | None = None) -> ServerState:
    p = profile.data
    model_dir = Path(p["model"]["path"])
    if not (model_dir / "config.json").is_file():
        raise StartupError(f"model directory {model_dir} holds no config.json "
                           f"(profile {profile.source}: /model/path or --model)")
    model_sha = ident.model_sha256(model_dir)
    if p["model"]["sha256"] and p["model"]["sha256"] != model_sha:
        raise StartupError(f"model directory digest {model_sha} differs from the profile's "
                           f"/model/sha256 {p['model']['sha256']}")
    keys = read_keys(p["api_key_file"])
    log = RequestLog(p["request_log"])
    identity = {"engine_version": engine.__version__, "package_sha256": ident.package_sha256(),
                "profile_sha256": profile.identity_sha256(), "model_sha256": model_sha,
                "kernel_build_id": ident.kernel_build_id()}
    try:
        decision = admit(p)
    except AdmissionRefused as e:
        log.write("server_start", admitted=False, admission=e.decision.as_dict(),
                  identity=identity)
        log.close()
        raise
    except ValueError as e:
        raise StartupError(str(e)) from None
    install_kernels(kernels)
    from engine.runtime.llm import LLM
    try:
        llm = LLM(str(model_dir), dtype=p["dtype"], kv_dtype=p["kv_dtype"],
                  device=decision.device, kv_capacity_tokens=decision.kv_capacity_tokens,
                  block_size=p["block_size"], prefill_chunk=decision.prefill_chunk,
                  max_concurrency=p["max_concurrency"],
                  max_pending=p["max_pending_requests"],
                  pending_timeout_s=p["pending_timeout_ms"] / 1000.0,
                  spec=p["speculative"]["backend"], draft_tokens=p["speculative"]["draft_tokens"],
                  max_model_len=p["max_context"])
    except (ValueError, OSError) as e:
        log.close()
        raise StartupError(f"engine could not load: {e}") from None
    llm.start()
    ck = None
    if p["checkpoints"]["directory"]:
        ck_identity = {"model_sha256": model_sha, "profile_sha256": identity["profile_sha256"],
                       "kv_dtype": str(llm.kv_dtype).replace("torch.", ""),
                       "engine_version": engine.__version__}
        key = origin_key(keys[0]) if p["checkpoints"]["require_origin_auth"] else None
        ck = CheckpointStore(p["checkpoints"]["directory"], ck_identity,
                             int(p["checkpoints"]["quota_mib"] * MIB), key)
    state = ServerState(
        profile=profile, llm=llm, auth=Authenticator(keys),
        responses=ResponseStore(p["response_store"]["max_responses"],
                                int(p["response_store"]["max_mib"] * MIB)),
        log=log, metrics=ServerMetrics(llm.status, p["model"]["name"]), identity=identity,
        admission=decision.as_dict(), checkpoints=ck,
        stop_token_ids=stop_token_ids(llm.tokenizer, str(model_dir)))
    log.write("server_start", admitted=True, admission=decision.as_dict(), identity=identity,
              device=str(llm.device), kv_dtype=str(llm.kv_dtype).replace("torch.", ""),
              listen=p["listen"], checkpoints=ck is not None,
              require_origin_auth=p["checkpoints"]["require_origin_auth"])
    return state
