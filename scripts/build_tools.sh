#!/usr/bin/env bash
# The system tools the build variations use (builders/variations.py): libfaketime for the clock
# offset, disorderfs (FUSE) for the file-system order. Installed with apt when missing; where they
# cannot be installed, say so and go on: the builds then record the clock / the order as not varied
# rather than pretend (and the bisection test, which needs every variation to vary, fails under CI).
# The build-host container gets these same binaries mounted read-only (hosts/build_container.py).
set -uo pipefail

missing=()
command -v faketime >/dev/null 2>&1 || missing+=(faketime)
command -v disorderfs >/dev/null 2>&1 || missing+=(disorderfs)
if [ ${#missing[@]} -eq 0 ]; then
    echo "build tools: faketime and disorderfs present"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
echo "build tools: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if timeout 300 $SUDO apt-get update -q >/dev/null && timeout 600 $SUDO apt-get install -y -q "${missing[@]}" >/dev/null; then
    echo "build tools: ${missing[*]} installed"
else
    echo "build tools: could not install ${missing[*]}; builds will record what they vary as not varied" >&2
fi
exit 0
