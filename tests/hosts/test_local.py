"""LocalHost against the real machine: no docker needed."""
import os
import time

import pytest

from hosts import CommandFailed, CommandTimeout, Host, LocalHost, TransferError
from hosts.base import file_sha256


@pytest.fixture
def host():
    return LocalHost()


def test_is_a_host(host):
    assert isinstance(host, Host)


def test_exit_code_stdout_stderr_and_times(host):
    r = host.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert r.started_at <= r.ended_at
    with pytest.raises(CommandFailed) as e:
        r.check()
    assert e.value.exit_code == 7 and "err" in e.value.stderr_tail


def test_shell_string_env_cwd_stdin(host, tmp_path):
    r = host.run("echo $FOO; pwd; cat", env={"FOO": "bar"}, cwd=str(tmp_path), stdin="piped")
    assert r.stdout == f"bar\n{tmp_path}\npiped"


def test_replace_env_drops_inherited(host):
    r = host.run(["/usr/bin/env"], env={"ONLY": "1"}, replace_env=True)
    assert r.stdout == "ONLY=1\n"


def test_on_output_sees_streams(host):
    seen = []
    host.run(["sh", "-c", "echo a; echo b >&2"], on_output=lambda s, t: seen.append((s, t)))
    assert ("stdout", "a\n") in seen and ("stderr", "b\n") in seen


def test_timeout_kills_whole_group(host, tmp_path):
    marker = tmp_path / "pid"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout) as e:
        host.run(f"sleep 300 & echo $! > {marker}; sleep 300", timeout=1.0)
    assert time.monotonic() - t0 < 10
    assert e.value.timeout == 1.0
    child = int(marker.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_put_get_file_and_tree(host, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(1000))
    digest = host.put(src, str(tmp_path / "dst"))
    assert host.get(str(tmp_path / "dst"), tmp_path / "back") == digest
    assert (tmp_path / "back" / "sub" / "b.bin").read_bytes() == (src / "sub" / "b.bin").read_bytes()
    assert host.put(src / "a.txt", str(tmp_path / "x" / "a.txt")) == file_sha256(src / "a.txt")
    with pytest.raises(TransferError, match="no such file"):
        host.put(tmp_path / "missing", str(tmp_path / "y"))


def test_exists_mkdir_remove(host, tmp_path):
    d = str(tmp_path / "p" / "q")
    assert not host.exists(d)
    host.mkdir(d)
    host.mkdir(d)
    assert host.exists(d)
    host.remove(str(tmp_path / "p"))
    host.remove(str(tmp_path / "p"))
    assert not host.exists(d)


def test_facts(host):
    f = host.facts()
    assert f.hostname and f.kernel and f.cpu_count >= 1 and f.memory_bytes > 0
    assert f.python_version.count(".") == 2


def test_raising_callback_cancels_and_kills_the_group(host, tmp_path):
    marker = tmp_path / "pid"

    def cancel(stream, text):
        if "started" in text:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        host.run(f"sleep 300 & echo $! > {marker}; echo started; wait", on_output=cancel, timeout=60)
    time.sleep(0.3)
    with pytest.raises(ProcessLookupError):
        os.kill(int(marker.read_text()), 0)
