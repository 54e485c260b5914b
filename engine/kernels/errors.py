"""Typed errors raised by the kernel ops."""

from __future__ import annotations


class KernelInputError(ValueError):
    """An argument of a kernel op has the wrong shape, dtype or device.

    ``op`` is the op that refused it, ``argument`` the parameter name, ``message`` what was
    expected and what arrived.
    """

    def __init__(self, op: str, argument: str, message: str) -> None:
        self.op = op
        self.argument = argument
        self.message = message
        super().__init__(f"{op}: argument {argument!r}: {message}")


class KernelBackendUnavailable(RuntimeError):
    """ENGINE_KERNELS forces a backend that cannot run the given tensors here."""
