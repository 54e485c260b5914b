"""Staging: a composed (not yet published) release copied under the store's staging prefix and
served anonymously, so that an acceptance window downloads exactly what a user would, before the
release is published.

Key layout: `staging/<version>-<manifest sha256[:12]>/<file>` (every file of the release
directory, manifest last, as publish uploads them). The store is write-once, and each compose writes
a new manifest, so each composed state of a release gets its own staging folder. `staging` is not a
version: releases.publish leaves it out of the published and unfinished versions.

Serving, for as long as the `served` context lasts: a filesystem store by a stdlib HTTP server on
127.0.0.1 and a free port, in a thread, read-only, GET and HEAD only, no credentials; an S3 store by a
bucket-policy statement that lets anyone GetObject under that one staging folder (path-style URL),
and the bucket's policy put back exactly as it was after."""
from __future__ import annotations

import functools
import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

from releases.canonical import sha256_hex
from releases.errors import StoreError
from releases.publish import _upload_order
from releases.release_dir import MANIFEST
from releases.stores.base import check_key
from releases.stores.local import LocalStore
from releases.stores.s3 import S3Store

STAGING_PREFIX = "staging"


@dataclass(frozen=True)
class Staged:
    version: str
    folder: str          # the store key prefix: staging/<version>-<manifest digest>/
    keys: list[str]      # every key written, manifest.json last
    manifest_sha256: str


def stage_release(release_dir: str | Path, store, version: str) -> Staged:
    """Copy the composed release directory under the staging prefix; returns where."""
    root = Path(release_dir)
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise StoreError(f"{root}: no {MANIFEST}; compose the release before staging it")
    digest = sha256_hex(manifest.read_bytes())
    folder = check_key(f"{STAGING_PREFIX}/{version}-{digest[:12]}") + "/"
    keys = []
    for rel in _upload_order(root):
        store.put_file(check_key(folder + rel), root / rel)
        keys.append(folder + rel)
    return Staged(version, folder, keys, digest)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass  # the window records what it downloaded; a request log line per asset is noise

    def list_directory(self, path):
        self.send_error(404, "no listings")  # assets are named by SHA256SUMS, not discovered
        return None


@contextmanager
def served(store, staged: Staged) -> Iterator[str]:
    """Serve the staged release anonymously for the life of the context; yields its base URL
    (ending in '/'). Only a filesystem store is served here."""
    if isinstance(store, S3Store):
        with _s3_public(store, staged) as url:
            yield url
        return
    if not isinstance(store, LocalStore):
        raise StoreError(f"{store!r}: cannot serve a staged release from this kind of store")
    handler = functools.partial(_QuietHandler, directory=str(store.root / STAGING_PREFIX))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="assay-staging", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{staged.folder[len(STAGING_PREFIX) + 1:]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


STATEMENT_SID = "AssayStagingAnonymousRead"


def _policy(client, bucket: str) -> str | None:
    try:
        return client.get_bucket_policy(Bucket=bucket)["Policy"]
    except client.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchBucketPolicy":
            return None
        raise StoreError(f"s3://{bucket}: cannot read the bucket policy ({exc})") from None


@contextmanager
def _s3_public(store: S3Store, staged: Staged) -> Iterator[str]:
    client, bucket = store.client, store.bucket
    prefix = store.prefix + staged.folder
    before = _policy(client, bucket)
    policy = json.loads(before) if before else {"Version": "2012-10-17", "Statement": []}
    policy["Statement"] = [st for st in policy["Statement"] if st.get("Sid") != STATEMENT_SID] + [
        {"Sid": STATEMENT_SID, "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/{prefix}*"}]
    client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    try:
        yield f"{client.meta.endpoint_url.rstrip('/')}/{bucket}/{prefix}"
    finally:
        if before is None:
            client.delete_bucket_policy(Bucket=bucket)
        else:
            client.put_bucket_policy(Bucket=bucket, Policy=before)
