"""Whether a GPU's name, as nvidia-smi reports it, is the GPU a lane names (its `gpu`): the
lane's preflight refuses a host without it, and lane evidence is refused whose preflight recorded
none (releases/evidence.py)."""

from __future__ import annotations

import re


def gpu_named(wanted: str, name: str) -> bool:
    """A whole word of NAME, any case: 'h200' is 'NVIDIA H200' and 'NVIDIA H200 NVL', not
    'NVIDIA H100 80GB HBM3' nor, for 'h20', 'NVIDIA H200'."""
    return wanted.lower() in re.split(r"[^0-9a-z]+", name.lower())
