"""The store named in assay.toml."""

from __future__ import annotations

from flows.config import Config
from releases.stores import LocalStore, S3Store


def open_store(cfg: Config):
    return store_from_spec(cfg.store)


def store_from_spec(spec: dict):
    """The store a `[store]` table names (paths already absolute): a dispatched lane's worker
    opens the release store from the table the dispatching run sends it."""
    if spec["kind"] == "filesystem":
        return LocalStore(spec["path"])
    return S3Store(bucket=spec["bucket"], prefix=spec.get("prefix", ""), endpoint_url=spec.get("endpoint_url"),
                   region=spec.get("region"))


def store_location(store, version: str) -> str:
    """Where a published version lives, for people: a directory or an s3:// address."""
    if isinstance(store, LocalStore):
        return str(store.root / version)
    return f"s3://{store.bucket}/{store.prefix}{version}/"
