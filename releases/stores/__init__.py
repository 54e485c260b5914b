"""Write-once release stores."""
from releases.stores.base import Store, check_key
from releases.stores.local import LocalStore
from releases.stores.s3 import S3Store

__all__ = ["Store", "LocalStore", "S3Store", "check_key"]
