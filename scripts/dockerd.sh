#!/usr/bin/env bash
# Make a docker daemon answer on the default socket: install docker.io when dockerd is missing,
# start dockerd in the background when the daemon does not answer, wait (bounded) until it does.
# Idempotent: a daemon that already answers is left alone.
set -euo pipefail

WAIT_S="${ASSAY_DOCKERD_WAIT_S:-60}"
LOG="${ASSAY_DOCKERD_LOG:-/var/log/assay-dockerd.log}"

answers() { timeout 10 docker info >/dev/null 2>&1; }

if answers; then
    echo "dockerd: already answering"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi

if ! command -v dockerd >/dev/null 2>&1; then
    echo "dockerd: not installed, installing docker.io"
    export DEBIAN_FRONTEND=noninteractive
    timeout 300 $SUDO apt-get update -q
    timeout 600 $SUDO apt-get install -y -q docker.io
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "dockerd: starting (log: $LOG)"
    # setsid + nohup: the daemon must outlive this script and the shell that ran it.
    $SUDO setsid nohup dockerd >"$LOG" 2>&1 < /dev/null &
fi

for _ in $(seq 1 "$WAIT_S"); do
    if answers; then
        echo "dockerd: answering"
        exit 0
    fi
    sleep 1
done
echo "dockerd: did not answer within ${WAIT_S}s; see $LOG" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
