"""Parsing of facts output, including nvidia-smi lines (no GPU on this machine: fixed text)."""
import pytest

from hosts.facts import parse_facts, parse_gpu_line


def test_gpu_line():
    g = parse_gpu_line("NVIDIA H200, GPU-1234, 570.86.15, 143771 MiB, 700.00 W, 700.00 W")
    assert (g.name, g.uuid, g.driver_version) == ("NVIDIA H200", "GPU-1234", "570.86.15")
    assert (g.memory_total_mib, g.power_limit_w, g.power_default_limit_w) == (143771.0, 700.0, 700.0)


def test_gpu_line_not_available_and_malformed():
    assert parse_gpu_line("X, U, D, [N/A], [N/A], 300 W").power_limit_w is None
    with pytest.raises(ValueError, match="expected 6"):
        parse_gpu_line("X, U")


def test_parse_facts():
    f = parse_facts("hostname=h\nkernel=6.1\nos=Debian\ncpu_count=4\nmem_kib=1024\npython=3.11.2\n"
                    "gpu=A, B, C, 10 MiB, 1 W, 2 W\n")
    assert (f.hostname, f.cpu_count, f.memory_bytes, f.python_version) == ("h", 4, 1024 * 1024, "3.11.2")
    assert len(f.gpus) == 1 and f.gpus[0].power_default_limit_w == 2.0
