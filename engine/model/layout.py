"""Projection weights stored column-major ([in, out] in memory) on CUDA and on the CPU.

A checkpoint stores a linear layer's weight as [out, in], rows contiguous, and F.linear then
asks the BLAS for x @ W^T. With the same weight stored transposed, the product is x @ Wt over a
contiguous [in, out] matrix, for which cuBLAS picks other kernels that run the decode-sized
projections faster (`python -m engine.benchmarks.projections`; figures in docs/perf/engine.md),
and the CPU's BLAS runs both the one-row decode products and the prefill products faster
(docs/perf/reference-model.md), except the down projection's one-row product, which it runs
faster row-major (CPU_ROW_MAJOR). The parameter keeps its logical [out, in] shape, so nothing
else changes; only its strides do. A weight shared with the embedding (tied lm_head) moves only
when asked (tied=True): the embedding then reads each row strided, which costs little next to
the vocabulary-sized product it speeds up. Where it pays (multi_row_copies_pay), the CPU also
gives every projection a row-major weight for products of several rows (keep_row_major_copies,
engine.model.projection)."""
from __future__ import annotations

import platform
from pathlib import Path

import torch
from torch import nn


# On the CPU the BLAS runs the one-row product of these layers faster over the row-major weight
# (a long reduction, intermediate -> hidden), the others faster column-major (one-row products of
# the reference model's shapes, 3 rounds: docs/perf/reference-model.md). A row-major layer also
# needs no copy for products of several rows (keep_row_major_copies).
CPU_ROW_MAJOR = ("mlp.down",)


def set_projection_layout(model: nn.Module, column_major: bool, tied: bool = False,
                          row_major: tuple[str, ...] = ()) -> None:
    """Re-lay every nn.Linear weight of model (one at a time, so the peak is one extra copy);
    tied=True also re-lays a weight shared with the embedding, which keeps sharing it. Layers
    whose qualified name ends with one of ``row_major`` (e.g. "mlp.down") are laid row-major.

    Call it before an engine captures CUDA graphs over the model (engine.model.weights.build_model
    does, on CUDA): a captured graph keeps reading the tensors it was captured with."""
    embed = getattr(model, "embed", None)
    shared = embed.weight.data_ptr() if embed is not None else None
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Linear) or (mod.weight.data_ptr() == shared and not tied):
            continue
        w = mod.weight.data
        cols = column_major and not any(name == r or name.endswith("." + r) for r in row_major)
        new = w.t().contiguous().t() if cols else w.contiguous()
        if new.data_ptr() != w.data_ptr():
            mod.weight = nn.Parameter(new, requires_grad=False)
            if getattr(mod, "rows", None) is not None:   # a row-major copy of the old weight
                mod.rows = None
            if w.data_ptr() == shared:
                embed.weight = mod.weight


def cpu_vendor() -> str:
    """The CPU's vendor id as Linux reports it ("GenuineIntel", "AuthenticAMD"), else the platform's
    processor name ("" where unknown)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def multi_row_copies_pay(vendor: str | None = None) -> bool:
    """Whether products of several rows should read row-major copies on this CPU.

    Both answers were measured with `python -m engine.benchmarks.cpu_reference` (batch 8 against
    the same batch over the one-row layouts; docs/perf/reference-model.md). On an AMD EPYC (AVX2)
    the BLAS (MKL) ran a few rows over the one-row layouts several times slower than W @ x^T over
    a row-major copy, so the copies paid (1.5-1.7x a batch-8 step). On an Intel Xeon (AVX-512) MKL
    runs its own kernels for those products, faster than W @ x^T, and the copies lost (the batch
    without them 1.2x faster). A fixed rule and not a timing at load: the layout decides how a
    product's sums are ordered, and a choice that flipped between two runs of one engine would
    change its outputs between them."""
    return (cpu_vendor() if vendor is None else vendor) != "GenuineIntel"


def is_column_major(w: torch.Tensor) -> bool:
    return w.dim() == 2 and w.stride(0) == 1 and w.stride(1) == w.shape[0]


def keep_row_major_copies(model: nn.Module) -> int:
    """Give every engine.model.projection.Projection of model a row-major weight for products of
    several rows: the weight itself where it is row-major already, else a copy (one more matrix
    per column-major layer). A tied embedding reads the lm_head's row-major one, so the tied
    pair costs one copy. Returns the bytes the copies added.

    On the CPU the one-row products run fastest over the layouts set_projection_layout gives,
    while products of a few rows (a batched decode step, a speculation window) run several times
    faster as W @ x^T over the row-major weight (`python -m engine.benchmarks.cpu_reference`,
    figures in docs/perf/reference-model.md)."""
    from engine.model.projection import Projection

    embed = getattr(model, "embed", None)
    added = 0
    for mod in model.modules():
        if not isinstance(mod, Projection):
            continue
        w = mod.weight.detach()
        if w.is_contiguous():
            mod.rows = w
            continue
        rows = w.contiguous()
        added += rows.numel() * rows.element_size()
        if embed is not None and embed.weight.data_ptr() == w.data_ptr():
            embed.weight = nn.Parameter(rows, requires_grad=False)
            rows = embed.weight.detach()
        mod.rows = rows
    return added
