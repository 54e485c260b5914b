"""The versions a wheel's declared dependencies resolve to in the environment that runs it.

A lane installs the engine wheel with --no-deps into a venv that reuses its base interpreter's
packages (gates/install.py), so the versions the lanes qualified are exactly those installed
beside that interpreter. They are read on the lane's host, with its python, so an SBOM names
what was qualified and not what the pipeline happens to have."""
from __future__ import annotations

import json

from builders.errors import SbomError
from hosts.base import Host

_QUERY = """\
import json, sys
from importlib import metadata
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out[name] = None
print(json.dumps({"python": ".".join(map(str, sys.version_info[:3])), "versions": out}))
"""


def resolve(host: Host, python: str, names: list[str], timeout: float = 120.0) -> dict:
    """{"python": "3.11.x", "versions": {name: version or None}} from PYTHON on HOST."""
    res = host.run([python, "-c", _QUERY, *names], timeout=timeout)
    if res.exit_code != 0:
        raise SbomError(f"resolving dependency versions with {python} on {host.name} failed "
                        f"(exit {res.exit_code}): {res.stderr[-500:]}")
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SbomError(f"resolving dependency versions on {host.name}: unreadable answer {res.stdout[-200:]!r}") from None
