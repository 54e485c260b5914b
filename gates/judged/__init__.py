"""Judged gates: the candidate against the incumbent, both served on one host, over HTTP only.

`run_judged(candidate, incumbent, lane=..., size=...)` runs determinism, ABBA speed, the
quality screen and TTFT parity and returns four verdict records (gates.stats judges them);
`measure_judged` and `judge_measured` are its two halves (measurements kept as evidence are judged
again); `python -m gates.judged` does the same against two URLs and writes the records as JSON.
Waivers: `applies(waiver, verdict, lane)`; a verdict blocks its lane when `blocks(verdict)`.
"""

from gates.judged.client import Endpoint
from gates.judged.errors import CorpusError, EndpointUnavailable, JudgedError, SettingsError
from gates.judged.run import KINDS, judge_measured, measure_judged, run_judged
from gates.judged.settings import resolve
from gates.judged.waivers import applies, blocks, why_not

__all__ = ["CorpusError", "Endpoint", "EndpointUnavailable", "JudgedError", "KINDS", "SettingsError", "applies",
           "blocks", "judge_measured", "measure_judged", "resolve", "run_judged", "why_not"]
