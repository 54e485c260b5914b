"""`python -m engine serve --profile PROFILE.json`: load, admit, serve, stop gracefully."""
from __future__ import annotations

import argparse
import sys
import time

EXIT_REFUSED = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", required=True, help="serving profile (JSON)")
    parser.add_argument("--host", help="listen address (overrides the profile)")
    parser.add_argument("--port", type=int, help="listen port (overrides the profile)")
    parser.add_argument("--model", help="model directory (overrides the profile)")
    parser.add_argument("--api-key-file", help="API key file (overrides the profile)")
    parser.add_argument("--kernels", help="AOT kernels artifact (a build's *-kernels.tar; default: "
                        "$ENGINE_KERNELS_ARTIFACT; none: Triton compiles just in time)")


def main(args: argparse.Namespace) -> int:
    from engine.server.admission import AdmissionRefused
    from engine.server.auth import KeyFileError
    from engine.server.bootstrap import StartupError, build_state
    from engine.server.profile import ProfileError, load_profile
    try:
        profile = load_profile(args.profile, host=args.host, port=args.port, model=args.model,
                               api_key_file=args.api_key_file)
        state = build_state(profile, kernels=getattr(args, "kernels", None))
    except AdmissionRefused as e:
        print(f"engine serve: refused to start: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except (ProfileError, KeyFileError, StartupError) as e:
        print(f"engine serve: {e}", file=sys.stderr)
        return EXIT_REFUSED
    return serve(state)


def serve(state) -> int:
    import uvicorn
    from engine.server.app import create_app
    from engine.server.sessions import flush_sessions

    class _Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            # Stop admitting at once; uvicorn then drains open requests up to its timeout.
            state.draining = True
            super().handle_exit(sig, frame)
            # uvicorn re-raises a captured signal once it has stopped, which would kill the
            # process before the checkpoint flush and the shutdown record below.
            self._captured_signals.clear()

    listen = state.profile["listen"]
    config = uvicorn.Config(create_app(state), host=listen["host"], port=listen["port"],
                            log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=state.profile["shutdown_timeout_s"])
    server = _Server(config)
    print(f"engine serve: starting on http://{listen['host']}:{listen['port']} "
          f"({state.admission['device']})", file=sys.stderr, flush=True)
    started = time.time()
    try:
        server.run()
    finally:
        state.draining = True
        stop_timeout = max(1.0, float(state.profile["shutdown_timeout_s"]))
        try:
            state.llm.stop(stop_timeout)
            stopped = True
        except Exception:  # the engine thread would not stop; record it rather than hang
            stopped = False
        saved, failed = flush_sessions(state)
        c = state.counters
        state.log.write("shutdown", complete=state.inflight == 0 and stopped,
                        completed=c.completed, drained_complete=c.drained_complete,
                        cancelled=c.cancelled, errors=c.errors, saved=saved,
                        save_failed=failed, refused=c.refused_draining + c.rejected,
                        refused_draining=c.refused_draining, inflight=state.inflight,
                        uptime_s=round(time.time() - started, 3))
        state.log.close()
    return 0 if server.started else 3
