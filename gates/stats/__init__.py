"""Statistical judges of qualification: pure functions from measurements to verdict records.

Each judge takes the parsed input (a dict as described by gates/stats/schemas/input-<kind>.schema.json)
and returns a verdict record that validates against releases/schemas/verdict-<kind>.schema.json.
"""

from gates.stats.abba import judge_abba
from gates.stats.determinism import judge_determinism
from gates.stats.errors import InputError, StatsError
from gates.stats.latency import judge_latency
from gates.stats.noninferiority import judge_noninferiority
from gates.stats.records import EXIT_CODES

JUDGES = {
    "abba": judge_abba,
    "noninferiority": judge_noninferiority,
    "determinism": judge_determinism,
    "latency": judge_latency,
}


def judge(kind: str, data: dict, *, source: str = "<input>") -> dict:
    """Run the judge named kind (abba|noninferiority|determinism|latency) on data."""
    if kind not in JUDGES:
        raise InputError(source, "$", f"unknown judge {kind!r}; expected one of {', '.join(JUDGES)}")
    return JUDGES[kind](data, source=source)


__all__ = ["EXIT_CODES", "InputError", "JUDGES", "StatsError", "judge", "judge_abba", "judge_determinism",
           "judge_latency", "judge_noninferiority"]
