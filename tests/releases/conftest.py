"""Fixtures for release tests; the builders live in tests/releases/fixtures.py."""
from __future__ import annotations

import pytest

from tests.releases.fixtures import SyntheticRelease, build_release


@pytest.fixture(autouse=True)
def private_user_config(tmp_path, monkeypatch):
    """Each test gets its own empty user config dir: no trust file or key of the machine's user leaks in."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user-config"))


@pytest.fixture
def published_release(tmp_path) -> SyntheticRelease:
    """A complete, approved release directory at tmp_path/"1.2.3" (verifies with require_ready)."""
    return build_release(tmp_path / "1.2.3", state="published")


@pytest.fixture
def ready_release(tmp_path) -> SyntheticRelease:
    """A complete release directory in state ready (no approval yet)."""
    return build_release(tmp_path / "1.2.3", state="ready")


@pytest.fixture(scope="module")
def moto_endpoint():
    """A real S3 API (moto's server) on 127.0.0.1, on a free port; stopped after the module."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_store(moto_endpoint):
    """An S3Store on a fresh bucket (moto keeps buckets process-wide, so each test gets its own)."""
    import uuid

    import boto3

    from releases.stores import S3Store

    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    bucket = f"assay-test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1", **creds).create_bucket(Bucket=bucket)
    return S3Store(bucket, prefix="releases", endpoint_url=moto_endpoint, region="us-east-1", credentials=creds,
                   timeout_s=10)
