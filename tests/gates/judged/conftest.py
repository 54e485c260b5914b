"""Two real engine servers (the working tree's engine, the tiny model) on 127.0.0.1 free ports:
the candidate and the incumbent of the judged-gate tests. Checkpoints are on so that the
restored-session latency position can restart them."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from gates.judged.client import Endpoint
from tests.engine.server.live import KEY, Server, base_profile

# Small enough for two shared cores, large enough for the quality prompts (about 1,300 bytes,
# one tiny-model token each) plus their answers.
SMALL = {"abba": {"cases": ["fresh-64-decode-48"], "min_ratio": 0.01, "floor": 0.01},
         "noninferiority": {"cases": 3, "variants": 2, "min_perturbed_cases": 3, "max_tokens": 6,
                            "resamples": 2000},
         "determinism": {"prompts": 3, "max_tokens": 6},
         "latency": {"fanout": 2, "repeats": 1, "max_tokens": 4}}


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("model") / "tiny"
    proc = subprocess.run([sys.executable, "-m", "engine", "make-tiny-model", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def _profile(model, checkpoints):
    return {**base_profile(model), "max_context": 2048, "kv_capacity": 8192,
            "checkpoints": {"directory": str(checkpoints), "auto_save_min_tokens": 100000}}


class Pair:
    """The candidate and incumbent servers, restartable (same checkpoint folder, new port)."""

    def __init__(self, root, model):
        self.root, self.model = root, model
        # Started side by side: each start is mostly waiting for the model to load.
        with ThreadPoolExecutor(2) as pool:
            started = pool.map(lambda role: Server(root / role / "0", _profile(model, root / role / "ckpt")).start(),
                               ("candidate", "incumbent"))
            self.servers = dict(zip(("candidate", "incumbent"), started))
        self.restarts = 0

    def endpoint(self, role) -> Endpoint:
        return Endpoint(role, self.servers[role].url, KEY)

    def restart(self, role) -> Endpoint:
        self.servers[role].stop()
        self.restarts += 1
        server = Server(self.root / role / str(self.restarts), _profile(self.model, self.root / role / "ckpt"))
        self.servers[role] = server.start()
        return self.endpoint(role)

    def stop(self):
        for server in self.servers.values():
            server.stop()


@pytest.fixture(scope="module")
def pair(tiny_model, tmp_path_factory):
    p = Pair(tmp_path_factory.mktemp("judged"), tiny_model)
    try:
        yield p
    finally:
        p.stop()
