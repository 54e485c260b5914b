"""The native phase chain: one module per phase, each `run(rt) -> facts` (raising PhaseFailed to
fail), in the order of gates.kinds.NATIVE_CHAIN. `restore` lives in gates/qualify.py's window
handling because it must run whatever happened before it."""

from gates.native import (benchmark, client_turn, context, install, preflight, pressure, protocol, restart,
                          security, startup_fit)

PHASES = {
    "preflight": preflight.run,
    "install": install.run,
    "startup-fit": startup_fit.run,
    "protocol": protocol.run,
    "pressure-protocol": pressure.run,
    "context": context.run,
    "restart": restart.run,
    "security": security.run,
    "client-turn": client_turn.run,
    "benchmark": benchmark.run,
}
