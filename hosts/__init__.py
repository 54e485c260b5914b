"""hosts: where commands run. The Host protocol, LocalHost / SSHHost / DockerHost, inventory,
GPU-owner leases, host-state snapshot and restore, and the sshd test bed. Imports no other
folder of the pipeline."""
from hosts.base import GpuFact, Host, HostFacts, RunResult
from hosts.errors import (CommandFailed, CommandTimeout, HostError, HostKeyRejected, HostLost,
                          InventoryError, LeaseHeld, LeaseLost, RestoreIncomplete, TransferError)
from hosts.local import LocalHost

__all__ = ["GpuFact", "Host", "HostFacts", "RunResult", "CommandFailed", "CommandTimeout",
           "HostError", "HostKeyRejected", "HostLost", "InventoryError", "LeaseHeld", "LeaseLost",
           "RestoreIncomplete", "TransferError", "LocalHost"]
