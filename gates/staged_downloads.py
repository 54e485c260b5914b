"""Download every asset of a staged release ON the host, anonymously, and check each against
SHA256SUMS: what the acceptance predicate records as `downloads` (releases/schemas/acceptance.schema.json).

The download runs on the host (its python3 and stdlib urllib, no credentials, no Authorization
header) so that what is proven is that the host can fetch the release as a user would; the digest
the host computes is compared here with the sum the release lists."""
from __future__ import annotations

import hashlib
import json

from releases.sums import SUMS_NAME, parse_sums

# Runs on the host: argv = base URL, destination folder, then the relative paths to fetch.
# Prints one JSON object: {path: sha256 of what arrived, or null when it did not}.
_FETCH = r'''
import hashlib, json, os, sys, urllib.request
base, dest, rels = sys.argv[1], sys.argv[2], sys.argv[3:]
out = {}
for rel in rels:
    path = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(base + rel, timeout=60) as r, open(path, "wb") as f:
            for chunk in iter(lambda: r.read(1 << 20), b""):
                h.update(chunk); f.write(chunk)
        out[rel] = h.hexdigest()
    except Exception as exc:
        print(f"{rel}: {exc}", file=sys.stderr)
        out[rel] = None
print(json.dumps(out))
'''


def download_staged(host, url: str, dest: str, sums_bytes: bytes, *, timeout_s: float = 600.0) -> list[dict]:
    """[{"name", "sha256" (what the host received, or "" when nothing arrived), "anonymous": True,
    "matched"}] for SHA256SUMS itself and every entry it lists; DEST on the host holds the files."""
    listed = parse_sums(sums_bytes)
    rels = [SUMS_NAME, *sorted(listed)]
    res = host.run(["python3", "-c", _FETCH, url if url.endswith("/") else url + "/", dest, *rels], timeout=timeout_s)
    got = json.loads(res.check().stdout.strip().splitlines()[-1])
    want = {SUMS_NAME: hashlib.sha256(sums_bytes).hexdigest(), **listed}
    return [{"name": rel, "sha256": got.get(rel) or "", "anonymous": True, "matched": got.get(rel) == want[rel]}
            for rel in rels]
