"""Entry point on the lane host: `python run.py OP` with a JSON object of arguments on stdin;
prints one JSON line. Exit 0 with the result, 2 for an unknown operation."""

import json
import sys

import bench
import client_turn
import context
import files
import protocol
import random_model
import wire

OPS = {
    "wait": lambda a: wire.wait(a["base"], a.get("timeout", 600)),
    "protocol": protocol.protocol,
    "pressure": protocol.pressure,
    "context": context.context,
    "bench": bench.bench,
    "random-model": random_model.random_model,
    "copy-bandwidth": random_model.copy_bandwidth,
    "client-turn": client_turn.client_turn,
    "perms": files.perms,
    "disk": files.disk,
    "tamper": files.tamper,
    "contains": files.contains,
    "checkpoint-files": files.checkpoint_files,
    "read-json": files.read_json,
    "log-events": files.log_events,
    "request": lambda a: dict(zip(("status", "body"), wire.request(a["base"], a["method"], a["path"], key=a.get("key"),
                                                                     body=a.get("body"), timeout=a.get("timeout", 600)))),
}


def main(argv):
    if len(argv) != 2 or argv[1] not in OPS:
        print(f"usage: run.py {{{'|'.join(OPS)}}} < ARGS.json", file=sys.stderr)
        return 2
    args = json.load(sys.stdin)
    print(json.dumps(OPS[argv[1]](args), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
