"""Runs on the lane host: start the engine under test and stay its parent, so that its exit code
is known after it stops. usage: launch.py STATE_DIR LOG -- ARGV...
Writes STATE_DIR/pid (the engine's pid) at start and STATE_DIR/exit (its exit code) at the end."""

import os
import subprocess
import sys


def main(argv):
    state, log, sep, cmd = argv[1], argv[2], argv[3], argv[4:]
    if sep != "--" or not cmd:
        print("usage: launch.py STATE_DIR LOG -- ARGV...", file=sys.stderr)
        return 2
    os.makedirs(state, exist_ok=True)
    for name in ("pid", "exit"):
        if os.path.exists(os.path.join(state, name)):
            os.unlink(os.path.join(state, name))
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _write(os.path.join(state, "pid"), str(proc.pid))
        code = proc.wait()
    _write(os.path.join(state, "exit"), str(code))
    return 0


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
