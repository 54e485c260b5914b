"""Session fixture for the sshd test bed, the docker skip logic (marker `docker`: without a
docker daemon those tests skip, unless ASSAY_REQUIRE_DOCKER=1, then they fail), and the suite's
own temporary directory."""
import importlib.util
import os
import sys
import tempfile
import uuid

import pytest


def _import_triton_interpreted() -> None:
    """Without CUDA the kernel tests run Triton's interpreter, and `triton.language`'s own jit'd
    helpers (tl.max, tl.sum, ...) are built as interpreted functions only when TRITON_INTERPRET=1
    is set as triton first imports. Import it so here, before any test module can import it
    otherwise; the variable is then taken out again (tests/engine/kernels/conftest.py sets it
    around its own tests only)."""
    if "triton" in sys.modules or importlib.util.find_spec("triton") is None:
        return
    import torch

    if torch.cuda.is_available():
        return
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton.language  # noqa: F401
    finally:
        if before is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = before


_import_triton_interpreted()


def _docker_problem() -> str | None:
    try:
        import docker

        docker.from_env(timeout=10).ping()
        return None
    except Exception as e:  # any failure to reach the daemon means the same thing here
        return f"docker daemon unavailable: {e}"


_PROBLEM: list = []


def docker_problem() -> str | None:
    if not _PROBLEM:
        _PROBLEM.append(_docker_problem())
    return _PROBLEM[0]


def require_docker() -> None:
    problem = docker_problem()
    if problem is None:
        return
    if os.environ.get("ASSAY_REQUIRE_DOCKER") == "1":
        pytest.fail(f"ASSAY_REQUIRE_DOCKER=1 but {problem}")
    pytest.skip(problem)


def pytest_runtest_setup(item):
    if item.get_closest_marker("docker") is not None:
        require_docker()


@pytest.fixture(scope="session", autouse=True)
def suite_tmpdir(tmp_path_factory):
    """TMPDIR (and tempfile's default) for the whole session: a folder under pytest's base temp.

    Some tests kill what they start on purpose (an installer at activation, Prefect workers),
    and a killed process leaves its scratch folders behind. Under pytest's base temp they go
    with it (pytest keeps the last three runs) instead of piling up in the machine's /tmp."""
    path = tmp_path_factory.mktemp("tmp", numbered=False)
    saved = {k: os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")}
    for k in saved:
        os.environ[k] = str(path)
    tempfile.tempdir = None            # gettempdir() caches its answer: look again
    try:
        yield path
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        tempfile.tempdir = None


@pytest.fixture(scope="session")
def testbed(tmp_path_factory):
    """Two sshd containers on 127.0.0.1 ports; yields the path of their inventory."""
    require_docker()
    from tests.testbed import bed

    bed_id = "t" + uuid.uuid4().hex[:8]
    inventory = tmp_path_factory.mktemp("testbed") / "hosts.toml"
    try:
        bed.up(2, inventory, log=lambda *_: None, bed_id=bed_id)
        yield inventory
    finally:
        bed.down(log=lambda *_: None, bed_id=bed_id)
