#!/usr/bin/env bash
# The system tools the build variations use (builders/variations.py): libfaketime for the clock
# offset. Installed with apt when missing; where it cannot be installed, say so and go on: the
# builds then record the clock as not varied rather than pretend (and the bisection test, which
# needs the clock to vary, fails under CI).
set -uo pipefail

if command -v faketime >/dev/null 2>&1; then
    echo "build tools: faketime present"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
echo "build tools: installing faketime"
export DEBIAN_FRONTEND=noninteractive
if timeout 300 $SUDO apt-get update -q >/dev/null && timeout 600 $SUDO apt-get install -y -q faketime >/dev/null; then
    echo "build tools: faketime installed"
else
    echo "build tools: could not install faketime; builds will record the clock as not varied" >&2
fi
exit 0
