"""S3Store: write-once objects in an S3 bucket (any S3-compatible endpoint)."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from releases.canonical import file_sha256
from releases.errors import PublishRefused, StoreError
from releases.stores.base import check_key

_NOT_SUPPORTED = {"NotImplemented", "NotSupported", "InvalidArgument"}


class S3Store:
    def __init__(self, bucket: str, prefix: str = "", endpoint_url: str | None = None, region: str | None = None,
                 credentials: Mapping[str, str] | None = None, *, timeout_s: float = 30.0) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        creds: dict[str, Any] = dict(credentials or {})  # empty: boto3's default credential chain
        config = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 3, "mode": "standard"})
        self.client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region, config=config, **creds)
        # Set to False after a server rejects If-None-Match; then we fall back to head-then-put.
        self.conditional_put = True

    def __repr__(self) -> str:
        return f"S3Store(s3://{self.bucket}/{self.prefix})"

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _fail(self, action: str, key: str, exc: Exception) -> StoreError:
        return StoreError(f"{self!r}: {action} {key} failed: {exc}")

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail("head", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fail("head", key, exc) from exc

    def _stored_sha256(self, key: str) -> str:
        h = hashlib.sha256()
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            for chunk in body.iter_chunks(1 << 20):
                h.update(chunk)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("get", key, exc) from exc
        return h.hexdigest()

    def _refuse_if_different(self, key: str, sha: str) -> str:
        existing = self._stored_sha256(key)
        if existing != sha:
            raise PublishRefused(f"{self!r}: key {key} already holds different bytes; refusing to overwrite", key=key)
        return sha

    def put_file(self, key: str, path: str | Path) -> str:
        sha = file_sha256(path)
        if not self.conditional_put:
            # Fallback for servers without conditional writes: a race between head and put remains,
            # which is why the publish flow re-downloads and verifies everything afterwards.
            if self.exists(key):
                return self._refuse_if_different(key, sha)
            return self._put(key, path, sha, conditional=False)
        try:
            return self._put(key, path, sha, conditional=True)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "PreconditionFailed" or status == 412:
                return self._refuse_if_different(key, sha)
            if code in _NOT_SUPPORTED or status == 501:
                self.conditional_put = False
                return self.put_file(key, path)
            raise self._fail("put", key, exc) from exc

    def _put(self, key: str, path: str | Path, sha: str, *, conditional: bool) -> str:
        extra = {"IfNoneMatch": "*"} if conditional else {}
        try:
            with open(path, "rb") as body:
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body,
                                       Metadata={"sha256": sha}, **extra)
        except BotoCoreError as exc:
            raise self._fail("put", key, exc) from exc
        except ClientError as exc:
            if conditional:
                raise  # put_file decides: existing object, or no conditional-write support
            raise self._fail("put", key, exc) from exc
        return sha

    def get_file(self, key: str, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            with open(path, "wb") as out:
                for chunk in body.iter_chunks(1 << 20):
                    out.write(chunk)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
                raise StoreError(f"{self!r}: no object {key}") from exc
            raise self._fail("get", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fail("get", key, exc) from exc

    def read_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
                raise StoreError(f"{self!r}: no object {key}") from exc
            raise self._fail("get", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fail("get", key, exc) from exc

    def list(self, prefix: str = "") -> list[str]:
        keys = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
                keys += [obj["Key"][len(self.prefix):] for obj in page.get("Contents", [])]
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("list", prefix or "/", exc) from exc
        return sorted(keys)
