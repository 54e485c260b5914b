"""SSHHost against real sshd containers of the test bed (reached on 127.0.0.1 ports)."""
import os
import time

import pytest

from hosts import CommandFailed, CommandTimeout, Host
from hosts.base import file_sha256
from hosts.inventory import load_inventory

pytestmark = pytest.mark.docker


@pytest.fixture
def host(testbed):
    h = load_inventory(testbed).connect("tb0")
    yield h
    h.close()


def test_protocol_and_exit_codes(host):
    assert isinstance(host, Host)
    r = host.run(["sh", "-c", "echo out; echo err >&2; exit 5"])
    assert (r.exit_code, r.stdout, r.stderr) == (5, "out\n", "err\n")
    assert r.started_at <= r.ended_at
    with pytest.raises(CommandFailed, match="exited 5"):
        r.check()


def test_env_cwd_stdin_and_quoting(host):
    r = host.run("printf '%s|' \"$A\" \"$(pwd)\"; cat", env={"A": "x 'y' $z"}, cwd="/tmp", stdin=b"in\x00put")
    assert r.stdout == "x 'y' $z|/tmp|in\x00put"
    assert host.run(["printf", "%s", "a b;c"]).stdout == "a b;c"
    assert host.run(["/usr/bin/env"], env={"ONLY": "1"}, replace_env=True).stdout == "ONLY=1\n"
    assert host.run(["true"], cwd="/does/not/exist").exit_code == 125


def test_on_output_streams(host):
    seen = []
    host.run("echo a; echo b >&2", on_output=lambda s, t: seen.append((s, t)))
    assert ("stdout", "a\n") in seen and ("stderr", "b\n") in seen


def test_timeout_kills_the_whole_group(host):
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout) as e:
        host.run("sleep 301 & sleep 302; echo never", timeout=1.5)
    assert time.monotonic() - t0 < 8
    assert e.value.host == "tb0" and e.value.timeout == 1.5
    left = host.run("pgrep -f 'sleep 30[12]' || true").stdout
    assert left == ""


def test_50mb_round_trip(host, tmp_path):
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(50 * 2**20))
    digest = host.put(src, "/root/xfer/big.bin")
    assert digest == file_sha256(src)
    assert host.get("/root/xfer/big.bin", tmp_path / "back.bin") == digest
    assert file_sha256(tmp_path / "back.bin") == digest
    host.remove("/root/xfer")


def test_tree_round_trip_and_file_ops(host, tmp_path):
    src = tmp_path / "tree"
    (src / "a" / "b").mkdir(parents=True)
    (src / "top.txt").write_text("top")
    (src / "a" / "b" / "deep name.bin").write_bytes(os.urandom(4096))
    d = host.put(src, "/root/tree")
    assert host.exists("/root/tree/a/b/deep name.bin")
    assert host.get("/root/tree", tmp_path / "back") == d
    assert (tmp_path / "back" / "a" / "b" / "deep name.bin").read_bytes() == (src / "a" / "b" / "deep name.bin").read_bytes()
    host.mkdir("/root/m/n")
    host.mkdir("/root/m/n")
    assert host.exists("/root/m/n")
    host.remove("/root/m")
    host.remove("/root/m")
    assert not host.exists("/root/m")
    host.remove("/root/tree")


def test_idempotent_operation_reconnects_once(host):
    assert host.exists("/etc")
    host._client.get_transport().close()  # simulate the transport dropping between calls
    assert host.exists("/etc")


def test_facts(host):
    f = host.facts()
    assert f.os.startswith("Debian") and f.python_version.startswith("3.11") and f.cpu_count >= 1
    assert f.gpus == []


def test_cancellation_kills_the_remote_group(host):
    def cancel(stream, text):
        if "started" in text:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        host.run("sleep 321 & echo started; wait", on_output=cancel, timeout=60)
    assert host.run("pgrep -f 'sleep 32[1]' || true").stdout == ""
