"""Startup admission: weights + KV pool + headroom must fit the memory the device has free.

The headroom is the profile's `admission_headroom_mib` plus an upper bound of what one prefill
pass at the profile's chunk and context holds (ModelConfig.prefill_pass_bytes): a larger chunk
keeps more memory back from the KV pool rather than running out of it on a long prompt."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

MIB = 1 << 20
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# kv dtype -> (bytes per element, bytes of scale per head and token); int8 keeps an fp32 scale.
_KV_LAYOUT = {"float32": (4, 0), "float16": (2, 0), "bfloat16": (2, 0), "int8": (1, 4)}
_COMPUTE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


class AdmissionRefused(Exception):
    def __init__(self, decision: "AdmissionDecision"):
        super().__init__(decision.message())
        self.decision = decision


@dataclass(frozen=True)
class AdmissionDecision:
    device: str
    free_bytes: int
    free_source: str            # "cuda_mem_get_info" or "host_memory_mib"
    weights_bytes: int
    kv_bytes_per_token: int
    kv_capacity_tokens: int
    kv_bytes: int
    headroom_bytes: int         # the profile's headroom + prefill_bytes
    kv_capacity_mode: str       # "auto" or "fixed"
    admitted: bool
    prefill_chunk: int = 0      # tokens a prefill step takes (the profile's, or the device's default)
    prefill_bytes: int = 0      # ModelConfig.prefill_pass_bytes at that chunk and max_context

    def as_dict(self) -> dict:
        return asdict(self)

    def message(self) -> str:
        need = self.weights_bytes + self.kv_bytes + self.headroom_bytes
        verdict = "fits" if self.admitted else "does not fit"
        return (f"admission {verdict}: weights {self.weights_bytes} B + KV "
                f"{self.kv_bytes} B ({self.kv_capacity_tokens} tokens x "
                f"{self.kv_bytes_per_token} B) + headroom {self.headroom_bytes} B (of which a "
                f"{self.prefill_chunk}-token prefill pass {self.prefill_bytes} B) = {need} B; "
                f"free {self.free_bytes} B ({self.free_source} on {self.device})")


def weights_bytes(model_dir: str | Path) -> int:
    return sum(f.stat().st_size for f in Path(model_dir).rglob("*")
               if f.is_file() and f.suffix in _WEIGHT_SUFFIXES)


def _dtypes(cfg, kv_dtype: str, dtype: str) -> tuple[str, str]:
    """(compute dtype, KV dtype) names as the engine resolves them (engine.model.dtypes)."""
    compute = dtype if dtype != "auto" else cfg.torch_dtype
    compute = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(compute, compute)
    if compute not in _COMPUTE_BYTES:
        compute = "float32"   # the engine's own fallback for a dtype name it does not know
    # The engine keeps KV in the compute dtype unless told otherwise.
    kv = compute if kv_dtype == "auto" else {"bf16": "bfloat16", "fp32": "float32"}.get(kv_dtype, kv_dtype)
    return compute, kv if kv in _KV_LAYOUT else "float32"


def kv_bytes_per_token(model_dir: str | Path, kv_dtype: str, dtype: str) -> int:
    """Key + value bytes (and quantisation scales) one token occupies across all layers."""
    from engine.model.config import ModelConfig
    cfg = ModelConfig.from_dir(model_dir)
    elem, scale = _KV_LAYOUT[_dtypes(cfg, kv_dtype, dtype)[1]]
    return cfg.kv_bytes_per_token(elem, scale)


def prefill_chunk(profile_chunk: int | str, device: str, max_context: int) -> int:
    """The profile's prefill_chunk, or for "auto" the engine's default on that device."""
    if profile_chunk != "auto":
        return int(profile_chunk)
    from engine.runtime.prefill_chunk import default_prefill_chunk
    return default_prefill_chunk(device.split(":")[0], max_context)


def prefill_bytes(model_dir: str | Path, kv_dtype: str, dtype: str, chunk: int, max_context: int) -> int:
    """ModelConfig.prefill_pass_bytes for the profile's model, dtypes, chunk and context."""
    from engine.model.config import ModelConfig
    cfg = ModelConfig.from_dir(model_dir)
    compute, kv = _dtypes(cfg, kv_dtype, dtype)
    rows = min(chunk, max_context)
    return cfg.prefill_pass_bytes(rows, max_context, _COMPUTE_BYTES[compute], _KV_LAYOUT[kv][0])


def resolve_device(requested: str) -> str:
    if requested != "auto":
        return requested
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def free_memory(device: str, host_memory_mib: int) -> tuple[int, str]:
    if device == "cuda":
        import torch
        free, _total = torch.cuda.mem_get_info()
        return int(free), "cuda_mem_get_info"
    return host_memory_mib * MIB, "host_memory_mib"


def decide(*, device: str, free_bytes: int, free_source: str, weights: int, per_token: int,
           headroom_bytes: int, kv_capacity: int | str, block_size: int,
           min_tokens: int, chunk: int = 0, chunk_bytes: int = 0) -> AdmissionDecision:
    """Fixed capacity: admitted when everything fits. "auto": the largest whole number of
    blocks that fits after weights and headroom, admitted when that holds min_tokens.
    headroom_bytes already holds chunk_bytes, the prefill pass's share of it."""
    if kv_capacity == "auto":
        spare = free_bytes - weights - headroom_bytes
        blocks = max(spare // (per_token * block_size), 0) if spare > 0 else 0
        tokens = int(blocks * block_size)
        admitted = tokens >= max(min_tokens, block_size)
        mode = "auto"
    else:
        tokens = int(kv_capacity)
        admitted = weights + tokens * per_token + headroom_bytes <= free_bytes
        mode = "fixed"
    return AdmissionDecision(device=device, free_bytes=int(free_bytes), free_source=free_source,
                             weights_bytes=int(weights), kv_bytes_per_token=int(per_token),
                             kv_capacity_tokens=tokens, kv_bytes=tokens * per_token,
                             headroom_bytes=int(headroom_bytes), kv_capacity_mode=mode,
                             admitted=admitted, prefill_chunk=int(chunk), prefill_bytes=int(chunk_bytes))


def admit(profile_data: dict) -> AdmissionDecision:
    """Decide for a profile; raises AdmissionRefused when it does not fit."""
    device = resolve_device(profile_data["device"])
    free, source = free_memory(device, profile_data["host_memory_mib"])
    model_dir = profile_data["model"]["path"]
    max_context = profile_data["max_context"]
    chunk = prefill_chunk(profile_data["prefill_chunk"], device, max_context)
    chunk_bytes = prefill_bytes(model_dir, profile_data["kv_dtype"], profile_data["dtype"], chunk, max_context)
    d = decide(device=device, free_bytes=free, free_source=source,
               weights=weights_bytes(model_dir),
               per_token=kv_bytes_per_token(model_dir, profile_data["kv_dtype"],
                                                   profile_data["dtype"]),
               headroom_bytes=profile_data["admission_headroom_mib"] * MIB + chunk_bytes,
               kv_capacity=profile_data["kv_capacity"], block_size=profile_data["block_size"],
               min_tokens=max_context, chunk=chunk, chunk_bytes=chunk_bytes)
    if not d.admitted:
        raise AdmissionRefused(d)
    return d
