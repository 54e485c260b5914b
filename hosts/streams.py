"""Reading a command's output streams as they arrive, decoded incrementally, into buffers."""
from __future__ import annotations

import codecs
import threading
from typing import Callable

from hosts.base import OnOutput


class StreamCollector:
    """Collects stdout/stderr text; forwards each decoded piece to on_output."""

    def __init__(self, on_output: OnOutput | None) -> None:
        self._on_output = on_output
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}
        self._parts: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def feed(self, stream: str, data: bytes, final: bool = False) -> None:
        text = self._decoders[stream].decode(data, final)
        if not text:
            return
        with self._lock:
            self._parts[stream].append(text)
        if self._on_output is not None and self.error is None:
            try:
                self._on_output(stream, text)
            except BaseException as e:  # a callback that raises cancels the command
                self.error = e

    def text(self, stream: str) -> str:
        with self._lock:
            return "".join(self._parts[stream])


def pump(read: Callable[[int], bytes], stream: str, sink: StreamCollector) -> threading.Thread:
    """Start a daemon thread that reads until EOF and feeds sink."""

    def loop() -> None:
        while True:
            try:
                data = read(65536)
            except OSError:
                data = b""
            if not data:
                sink.feed(stream, b"", final=True)
                return
            sink.feed(stream, data)

    t = threading.Thread(target=loop, name=f"pump-{stream}", daemon=True)
    t.start()
    return t


class PgidMarker:
    """Strips the first stderr line '@@ASSAY-PGID <n>' that the remote wrapper prints, and
    remembers n: the process group to kill on timeout or cancellation."""

    PREFIX = b"@@ASSAY-PGID "

    def __init__(self, sink: StreamCollector) -> None:
        self._sink, self._buf, self.pgid, self._done = sink, b"", None, False

    def feed(self, data: bytes) -> None:
        if self._done:
            self._sink.feed("stderr", data)
            return
        self._buf += data
        if b"\n" not in self._buf:
            if len(self._buf) > 256 or not self.PREFIX.startswith(self._buf[: len(self.PREFIX)]):
                self._flush()
            return
        line, _, rest = self._buf.partition(b"\n")
        if line.startswith(self.PREFIX):
            try:
                self.pgid = int(line[len(self.PREFIX):])
            except ValueError:
                pass
            self._buf, self._done = b"", True
            if rest:
                self._sink.feed("stderr", rest)
        else:
            self._flush()

    def _flush(self) -> None:
        self._done, data, self._buf = True, self._buf, b""
        self._sink.feed("stderr", data)

    def close(self) -> None:
        if self._buf:
            self._flush()
        self._sink.feed("stderr", b"", final=True)
