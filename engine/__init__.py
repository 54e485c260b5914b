"""Assay's reference inference engine: PyTorch + Triton, paged KV, speculative decoding."""

__version__ = "0.1.0"
