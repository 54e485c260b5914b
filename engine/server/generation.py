"""One request's run through the engine: admission, streaming text, accounting, logging."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

from engine.errors import AdmissionError, PendingTimeout, QueueFull
from engine.runtime.sampling import SamplingParams
from engine.server.checkpoints import CheckpointError
from engine.server.errors import APIError
from engine.server.request_log import text_digest
from engine.server.sessions import restore_session, save_session
from engine.server.stop_strings import StopStrings
from engine.server.state import ServerState


class Detokenizer:
    """Incremental decoding whose deltas concatenate to the decoding of all tokens: a trailing
    replacement character (a UTF-8 sequence cut in half) is held back until completed."""

    def __init__(self, tokenizer: Any, hidden: set[int]):
        self.tok, self.hidden = tokenizer, hidden
        self.ids: list[int] = []
        self.sent = ""

    def push(self, tid: int) -> str:
        self.ids.append(int(tid))
        text = self.text()
        if text.endswith("\ufffd"):
            return ""
        return self._delta(text)

    def flush(self) -> str:
        return self._delta(self.text())

    def text(self) -> str:
        ids = self.ids
        while ids and ids[-1] in self.hidden:
            ids = ids[:-1]
        return self.tok.decode_text(ids)

    def _delta(self, text: str) -> str:
        if not text.startswith(self.sent):
            return ""  # a decoder that rewrote earlier text; the final text is still exact
        d, self.sent = text[len(self.sent):], text
        return d


@dataclass
class Outcome:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


def _engine_run_s(stats: dict, prefilled: int, generated: int) -> float:
    """Seconds the engine held the request (admission to finish), from its own rates: the
    engine's clock, not this thread's, so that one request's end and the next one's admission
    are ordered as the scheduler saw them."""
    pre, dec = stats.get("prefill_tok_s") or 0.0, stats.get("decode_tok_s") or 0.0
    return (prefilled / pre if pre > 0 else 0.0) + (max(generated - 1, 0) / dec if dec > 0
                                                     else 0.0)


class Generation:
    def __init__(self, state: ServerState, *, route: str, prompt_ids: list[int],
                 params: SamplingParams, session: str | None, arrived: float, prompt_text: str,
                 stop: list[str] | None = None):
        self.state, self.route, self.session = state, route, session
        self.prompt_ids, self.params = prompt_ids, params
        self.arrived, self.prompt_digest = arrived, text_digest(prompt_text)
        self.request_id = "req_" + uuid.uuid4().hex[:24]
        self.handle = None
        self._first: int | None = None
        self._times: list[float] = []
        self._ended = False
        self._abort_requested = False
        self.checkpoint: str | None = None
        self.detok = Detokenizer(state.tokenizer, set(params.stop_token_ids or ()))
        self.stop = StopStrings(stop) if stop else None
        self._shown: list[str] = []
        self._lp_at = 0                   # output tokens whose logprobs have been taken
        # output tokens up to the one that completed a stop string: the engine may have made a
        # few more before its cancel landed, which the client never sees nor pays for
        self._stop_at: int | None = None

    def open(self) -> None:
        """Blocking: claim the session, restore it, submit, wait for the first token."""
        st = self.state
        st.begin(self.session)
        try:
            if self.session is not None:
                self.checkpoint = restore_session(st, self.session)
            self.submitted = time.time()
            try:
                self.handle = st.llm.submit(self.prompt_ids, self.params, session=self.session)
                if self._abort_requested:  # the client left while this was being submitted
                    self.handle.cancel()
            except QueueFull as e:
                self._reject("server_overloaded", str(e))
            except AdmissionError as e:
                self._reject("context_length_exceeded", str(e), "messages")
            st.log.write("request_start", id=self.request_id, route=self.route,
                         prompt_tokens=len(self.prompt_ids), prompt_digest=self.prompt_digest,
                         session=self.session is not None, checkpoint=self.checkpoint,
                         max_new_tokens=self.params.max_new_tokens)
            self._it = iter(self.handle.stream())
            try:
                self._first = next(self._it, None)
            except PendingTimeout as e:
                self._reject("request_queue_timeout", str(e))
            self._times.append(time.time())
        except BaseException:
            self._end("rejected")
            raise

    def _reject(self, code: str, message: str, param: str | None = None):
        self.state.log.write("request_rejected", id=self.request_id, route=self.route,
                             code=code, reason=message)
        with self.state.lock:
            self.state.counters.rejected += 1
        raise APIError(code, message, param)

    def deltas(self) -> Iterator[str]:
        """The output text as it comes, cut at the first stop string (the engine request is
        then cancelled: nothing after it is wanted)."""
        for d in self._token_deltas():
            if self.stop is not None:
                d = self.stop.feed(d)
            if d:
                self._shown.append(d)
                yield d
            if self.stop is not None and self.stop.hit:
                self._stop_at = len(self.detok.ids)
                self.handle.cancel()
                return
        tail = self.stop.flush() if self.stop is not None else ""
        if tail:
            self._shown.append(tail)
            yield tail

    def take_logprobs(self) -> list:
        """The logprob records of the output tokens read since the last call, end-of-turn
        and other hidden tokens left out (they are not part of the text)."""
        if self.params.logprobs is None or self.handle is None:
            return []
        n = len(self.detok.ids)
        got = self.handle.logprobs[self._lp_at:n]
        self._lp_at = n
        return [e for e in got if e.token_id not in self.detok.hidden]

    def text(self) -> str:
        """The whole output text: what deltas() gave, exactly when a stop string cut it."""
        return "".join(self._shown) if self.stop is not None else self.detok.text()

    def _token_deltas(self) -> Iterator[str]:
        if self._first is None:
            return
        d = self.detok.push(self._first)
        if d:
            yield d
        for tid in self._it:
            self._times.append(time.time())
            d = self.detok.push(tid)
            if d:
                yield d
        tail = self.detok.flush()
        if tail:
            yield tail

    def finish(self) -> Outcome:
        """After deltas() is exhausted: the result, metrics, log record, automatic save."""
        st = self.state
        res = self.handle.result(timeout=60)
        ended = time.time()
        ids = list(res.token_ids)
        stats = dict(res.stats or {})
        first = self._times[0] if self._times else ended
        gaps = [b - a for a, b in zip(self._times, self._times[1:])]
        queue_s = float(stats.get("queue_s") or 0.0)
        spec = stats.get("spec") or {}
        run_s = _engine_run_s(stats, len(self.prompt_ids) - int(res.cached_tokens), len(ids))
        st.metrics.observe_tokens(first - self.arrived, gaps)
        st.metrics.observe_spec(spec)
        reason = "stop" if self.stop is not None and self.stop.hit else res.finish_reason
        shown = len(ids) if self._stop_at is None else min(self._stop_at, len(ids))
        out = Outcome(text=self.text(), finish_reason=reason,
                      prompt_tokens=int(res.prompt_tokens), completion_tokens=shown,
                      cached_tokens=int(res.cached_tokens))
        if self._ended:  # aborted: abort() has logged and accounted for it; nobody listens
            return out
        st.metrics.observe_request(out.prompt_tokens, out.completion_tokens, ended - self.arrived)
        saved = self._auto_save(len(self.prompt_ids) + len(ids))
        st.log.write("request_done", id=self.request_id, route=self.route,
                     finish_reason=out.finish_reason, prompt_tokens=out.prompt_tokens,
                     completion_tokens=out.completion_tokens, cached_tokens=out.cached_tokens,
                     output_digest=text_digest(out.text), checkpoint=self.checkpoint,
                     checkpoint_saved=saved, submitted_at=round(self.submitted, 6),
                     admitted_at=round(self.submitted + queue_s, 6),
                     engine_finished_at=round(self.submitted + queue_s + run_s, 6),
                     finished_at=round(ended, 6), queue_s=round(queue_s, 6),
                     engine_run_s=round(run_s, 6),
                     ttft_s=round(first - self.arrived, 6),
                     prefill_s=round(max(first - self.submitted - queue_s, 0.0), 6),
                     decode_s=round(ended - first, 6), total_s=round(ended - self.arrived, 6),
                     prefill_tok_s=stats.get("prefill_tok_s"),
                     decode_tok_s=stats.get("decode_tok_s"), spec=spec or None)
        self._end("completed" if out.finish_reason != "cancelled" else "cancelled", dirty=not saved)
        return out

    def _auto_save(self, total_tokens: int) -> bool:
        st = self.state
        if (self.session is None or st.checkpoints is None
                or total_tokens < st.profile["checkpoints"]["auto_save_min_tokens"]):
            return False
        try:
            save_session(st, self.session)
            return True
        except (APIError, CheckpointError, OSError):
            return False  # the session stays dirty and is retried at the next save point

    def abort(self, reason: str) -> None:
        """Client went away or the server failed mid-request: cancel and account once."""
        if self._ended:
            return
        # open() may be submitting on another thread: it reads this flag after setting
        # self.handle, and this reads self.handle after setting the flag, so one of the two
        # cancels the engine request.
        self._abort_requested = True
        if self.handle is not None:
            self.handle.cancel()
        self.state.log.write("request_error", id=self.request_id, route=self.route,
                             reason=reason, completion_tokens=len(self.detok.ids))
        self._end("cancelled" if reason == "client_disconnected" else "error")

    def _end(self, outcome: str, dirty: bool = False) -> None:
        if not self._ended:
            self._ended = True
            self.state.end(self.session, outcome, dirty=dirty)
