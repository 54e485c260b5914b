"""The one clock format of every record: RFC 3339 UTC with a `Z` and whole seconds.

Records compare `opened_at`/`closed_at` as strings, which orders them in time only while every
writer uses the same offset and precision; so there is exactly one function that writes them."""
from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """Now, as `YYYY-MM-DDTHH:MM:SSZ`."""
    return rfc3339(datetime.now(timezone.utc).timestamp())


def rfc3339(epoch: float) -> str:
    """A POSIX time as `YYYY-MM-DDTHH:MM:SSZ` (fractions dropped)."""
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
