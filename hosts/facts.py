"""Host facts gathered with one portable shell script, so every Host kind reports them alike."""
from __future__ import annotations

from hosts.base import GpuFact, HostFacts

NVIDIA_QUERY = ("nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,power.limit,"
                "power.default_limit --format=csv,noheader")

FACTS_SH = f"""
echo "hostname=$(uname -n)"
echo "kernel=$(uname -r)"
if [ -r /etc/os-release ]; then . /etc/os-release; echo "os=${{PRETTY_NAME:-$NAME}}"; else echo "os=$(uname -s)"; fi
echo "cpu_count=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)"
echo "mem_kib=$(awk '/^MemTotal:/ {{print $2}}' /proc/meminfo 2>/dev/null)"
echo "python=$(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null)"
if command -v nvidia-smi >/dev/null 2>&1; then
  {NVIDIA_QUERY} | sed 's/^/gpu=/'
fi
"""


def _number(text: str) -> float | None:
    """'143771 MiB' -> 143771.0, '700.00 W' -> 700.0, '[N/A]' -> None."""
    head = text.strip().split(" ")[0]
    try:
        return float(head)
    except ValueError:
        return None


def parse_gpu_line(line: str) -> GpuFact:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 6:
        raise ValueError(f"nvidia-smi line has {len(parts)} fields, expected 6: {line!r}")
    name, uuid, driver, mem, limit, default = parts
    return GpuFact(name, uuid, driver, _number(mem), _number(limit), _number(default))


def parse_facts(text: str) -> HostFacts:
    kv: dict[str, str] = {}
    gpus: list[GpuFact] = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "gpu":
            gpus.append(parse_gpu_line(value))
        else:
            kv[key] = value.strip()
    mem = kv.get("mem_kib", "")
    return HostFacts(hostname=kv.get("hostname", ""), os=kv.get("os", ""), kernel=kv.get("kernel", ""),
                     cpu_count=int(kv.get("cpu_count") or 0),
                     memory_bytes=int(mem) * 1024 if mem.isdigit() else 0,
                     python_version=kv.get("python", ""), gpus=gpus)


def gather_facts(host) -> HostFacts:
    return parse_facts(host.run(FACTS_SH, timeout=60).check().stdout)
