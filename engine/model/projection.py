"""A linear layer that computes a few rows at once over a row-major weight.

On the CPU the BLAS runs a projection's one-row product fastest over one layout of the weight
(column-major for most, engine.model.layout), but on some CPUs a few rows at once (a batched
decode step, a speculation window) several times slower over that layout than as W @ x^T over
the row-major weight: MKL then streams the weight once for all rows. engine.model.layout.keep_row_major_copies
gives each CPU projection that row-major weight (the weight itself when it is already
row-major, else a copy) on CPUs where that pays (multi_row_copies_pay: not on Intel's, whose
MKL kernels run those products faster over the one-row layouts); the product of several rows
reads it. Figures: `python -m engine.benchmarks.cpu_reference` (its batch rows) and
docs/perf/reference-model.md.

Prefill chunks (hundreds or thousands of rows) stay on the one-row layout, where the products
are compute-bound and the BLAS runs both layouts alike."""
from __future__ import annotations

import torch
from torch import nn


# Up to this many rows a product reads the row-major weight. The reference model's shapes at
# 2-64 rows ran fastest that way; at 256 rows all layouts and call forms were alike.
MULTI_ROW_MAX = 64


class Projection(nn.Linear):
    """nn.Linear (same parameters, same state dict) plus an optional row-major weight ``rows``
    for products of 2..rows_max rows (rows_max None: any number); rows None keeps nn.Linear's
    product for every row count. contiguous=False returns those products as a transposed view
    (the logits: a copy of every vocabulary row would cost more than the reader saves)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rows_max: int | None = MULTI_ROW_MAX, contiguous: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        self.rows: torch.Tensor | None = None
        self.rows_max = rows_max
        self.contiguous = contiguous

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, n = self.rows, x.shape[0]
        if rows is None or n < 2 or x.dim() != 2 or (self.rows_max is not None and n > self.rows_max):
            return super().forward(x)
        # W @ x^T computed into an [out, n] block; the caller gets [n, out] rows, contiguous
        # unless asked otherwise, because the attention reshapes its projection with view().
        y = (rows @ x.t()).t()
        y = y.contiguous() if self.contiguous else y
        return y if self.bias is None else y + self.bias
