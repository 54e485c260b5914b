"""Startup admission: weights + KV pool + headroom must fit the memory the device has free."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

MIB = 1 << 20
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# kv dtype -> (bytes per element, bytes of scale per head and token); int8 keeps an fp32 scale.
_KV_LAYOUT = {"float32": (4, 0), "float16": (2, 0), "bfloat16": (2, 0), "int8": (1, 4)}


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
    headroom_bytes: int
    kv_capacity_mode: str       # "auto" or "fixed"
    admitted: bool

    def as_dict(self) -> dict:
        return asdict(self)

    def message(self) -> str:
        need = self.weights_bytes + self.kv_bytes + self.headroom_bytes
        verdict = "fits" if self.admitted else "does not fit"
        return (f"admission {verdict}: weights {self.weights_bytes} B + KV "
                f"{self.kv_bytes} B ({self.kv_capacity_tokens} tokens x "
                f"{self.kv_bytes_per_token} B) + headroom {self.headroom_bytes} B = {need} B; "
                f"free {self.free_bytes} B ({self.free_source} on {self.device})")


def weights_bytes(model_dir: str | Path) -> int:
    return sum(f.stat().st_size for f in Path(model_dir).rglob("*")
               if f.is_file() and f.suffix in _WEIGHT_SUFFIXES)


def kv_bytes_per_token(model_dir: str | Path, kv_dtype: str, dtype: str) -> int:
    """Key + value bytes (and quantisation scales) one token occupies across all layers."""
    from engine.model.config import ModelConfig
    cfg = ModelConfig.from_dir(model_dir)
    if kv_dtype == "auto":
        # The engine keeps KV in the compute dtype, which "auto" takes from the checkpoint.
        kv_dtype = dtype if dtype != "auto" else cfg.torch_dtype
    if kv_dtype not in _KV_LAYOUT:
        kv_dtype = "float32"  # the engine's own fallback for a dtype name it does not know
    elem, scale = _KV_LAYOUT[kv_dtype]
    return cfg.kv_bytes_per_token(elem, scale)


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
           min_tokens: int) -> AdmissionDecision:
    """Fixed capacity: admitted when everything fits. "auto": the largest whole number of
    blocks that fits after weights and headroom, admitted when that holds min_tokens."""
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
                             admitted=admitted)


def admit(profile_data: dict) -> AdmissionDecision:
    """Decide for a profile; raises AdmissionRefused when it does not fit."""
    device = resolve_device(profile_data["device"])
    free, source = free_memory(device, profile_data["host_memory_mib"])
    model_dir = profile_data["model"]["path"]
    d = decide(device=device, free_bytes=free, free_source=source,
               weights=weights_bytes(model_dir),
               per_token=kv_bytes_per_token(model_dir, profile_data["kv_dtype"],
                                                   profile_data["dtype"]),
               headroom_bytes=profile_data["admission_headroom_mib"] * MIB,
               kv_capacity=profile_data["kv_capacity"], block_size=profile_data["block_size"],
               min_tokens=profile_data["max_context"])
    if not d.admitted:
        raise AdmissionRefused(d)
    return d
