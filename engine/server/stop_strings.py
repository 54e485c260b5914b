"""Stop strings: cut the output text where the first of them begins.

Text is released as soon as it can no longer be the start of a stop string, so a streamed
answer never shows part of a stop string and then takes it back.
"""
from __future__ import annotations


class StopStrings:
    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.held = ""          # text that may still turn out to start a stop string
        self.hit = False

    def feed(self, delta: str) -> str:
        """The part of `delta` (with what was held) that is safe to show; after a stop string
        is found, only the text before it and nothing ever again."""
        if self.hit:
            return ""
        buf = self.held + delta
        found = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if found:
            self.hit, self.held = True, ""
            return buf[:min(found)]
        keep = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(buf)), keep, -1):
                if buf.endswith(s[:k]):
                    keep = k
                    break
        self.held = buf[len(buf) - keep:]
        return buf[:len(buf) - keep]

    def flush(self) -> str:
        """At the end of the output: what was held back was not a stop string after all."""
        out, self.held = ("" if self.hit else self.held), ""
        return out
