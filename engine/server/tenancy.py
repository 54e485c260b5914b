"""Tenancy: stored responses and prompt-cache sessions belong to the API key that made them.

A tenant is named by a digest of its API key (the key itself is never kept, logged or written
into a checkpoint path). Without a key file every client is the one tenant `public`.
An engine session is `<tenant>/<prompt_cache_key>`, so two keys that send the same
prompt_cache_key hold two separate sessions and neither can see the other's cached tokens.
"""
from __future__ import annotations

import hashlib

from starlette.requests import Request

PUBLIC = "public"
_CONTEXT = b"assay-engine/tenant/v1\0"


def tenant_id(api_key: str | None) -> str:
    """The tenant an API key speaks for: 32 hex digits of a sha256 over a fixed context and
    the key; PUBLIC when the server has no keys."""
    if api_key is None:
        return PUBLIC
    return hashlib.sha256(_CONTEXT + api_key.encode("utf-8")).hexdigest()[:32]


def session_key(tenant: str, prompt_cache_key: str | None) -> str | None:
    """The engine session a tenant's prompt_cache_key names."""
    return None if prompt_cache_key is None else f"{tenant}/{prompt_cache_key}"


def request_tenant(request: Request) -> str:
    """The tenant the authentication middleware found for this request."""
    return getattr(request.state, "tenant", PUBLIC)
